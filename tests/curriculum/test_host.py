"""The host side: stage file, decisions from env reports, events, heartbeat, manifest, cleanup."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from mosaic_core.config import WorkerConfig
from mosaic_core.events import EventEmitter, read_events
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_curriculum import plugin
from mosaic_curriculum.stagefile import StageFile, stage_path

SCHEDULE = [
    {"env_id": "CartPole-v1", "steps": 100},
    {"env_id": "CartPole-v0", "until": "episodes>=3|episode_return>=50", "return_window": 2},
    {"env_id": "CartPole-v1"},
]


@pytest.fixture
def run(tmp_path):
    config = WorkerConfig(
        run_id="r1", algo="ppo", env_id="CartPole-v1", total_timesteps=1000, extras={"curriculum_schedule": SCHEDULE}
    )
    directory = RunDirectory.for_run(tmp_path, "r1").create()
    ctx = RunContext(config=config, directory=directory, worker="cleanrl")
    ctx.emitter = EventEmitter("r1", directory.events, stream=io.StringIO())
    plugin.mosaic_run_started(ctx)
    yield ctx
    ctx.emitter.close()


def report(run, stage, steps=0, returns=(), episodes=None):
    payload = {"stage": stage, "steps": steps, "returns": list(returns)}
    if episodes is not None:
        payload["episodes"] = episodes
    plugin.mosaic_on_child_message(run, "curriculum", payload)


def stages(run):
    return [e["payload"] for e in read_events(run.directory.events) if e["event"] == "curriculum_stage"]


def stage_word(run):
    reader = StageFile.open(stage_path(run.run_dir))
    try:
        return reader.read()
    finally:
        reader.close()


def test_stage_zero_is_announced_at_start(run):
    assert stages(run) == [
        {"stage": 0, "env_id": "CartPole-v1", "condition": "start", "stages": 3, "until": "steps>=100"}
    ]
    assert stage_word(run) == 0


def test_reports_from_all_envs_add_up_to_one_decision(run):
    for _ in range(3):
        report(run, 0, steps=30, returns=[10.0])
    assert stage_word(run) == 0 and len(stages(run)) == 1
    report(run, 0, steps=10)
    assert stage_word(run) == 1
    event = stages(run)[1]
    assert event == {
        "stage": 1,
        "env_id": "CartPole-v0",
        "condition": "steps>=100",
        "until": "episodes>=3|episode_return>=50.0",
        "previous_stage": 0,
        "previous_env_id": "CartPole-v1",
        "stage_steps": 100,
        "stage_episodes": 3,
        "mean_return": 10.0,
        "total_steps": 100,
    }


def test_reports_from_envs_still_on_an_old_stage_do_not_count_for_the_new_one(run):
    report(run, 0, steps=100)
    assert stage_word(run) == 1
    report(run, 0, steps=50, returns=[60.0] * 5)  # late: these envs have not reset yet
    assert stage_word(run) == 1  # stage 1 needs 3 episodes of its own
    report(run, 1, steps=20, returns=[1.0])
    report(run, 1, steps=20, returns=[1.0])
    assert stage_word(run) == 1
    report(run, 1, steps=20, returns=[1.0])
    assert stage_word(run) == 2
    assert stages(run)[-1]["condition"] == "episodes>=3"
    assert stages(run)[-1]["stage_steps"] == 60


def test_episode_return_condition_and_the_last_stage(run):
    report(run, 0, steps=100)
    report(run, 1, steps=20, returns=[90.0])  # one lucky episode: the window of 2 is not full
    assert stage_word(run) == 1
    report(run, 1, steps=5, returns=[10.0])  # window (90, 10): mean 50 fires, 2 episodes of 3
    assert stage_word(run) == 2
    assert stages(run)[-1]["condition"] == "episode_return>=50.0"
    report(run, 2, steps=10**6, returns=[1e6] * 10)
    assert stage_word(run) == 2  # the last stage runs to the end
    assert len(stages(run)) == 3


def test_malformed_reports_are_counted_and_ignored(run):
    for payload in (
        {},
        {"stage": "x"},
        {"stage": 7, "steps": 500},
        {"stage": 0, "steps": -5},
        {"stage": 0, "returns": 3},
    ):
        plugin.mosaic_on_child_message(run, "curriculum", payload)
    plugin.mosaic_on_child_message(run, "other-kind", {"stage": 0, "steps": 10**6})
    assert stage_word(run) == 0
    assert plugin.mosaic_build_manifest(run, "completed")["curriculum"]["ignored_reports"] == 5


def test_heartbeat_manifest_and_cleanup(run):
    report(run, 0, steps=120, returns=[5.0, 7.0])
    report(run, 0, steps=8)  # a late report of stage 0
    report(run, 1, steps=4, episodes=1, returns=[])  # returns lost (host was unreachable), count kept
    assert plugin.mosaic_on_heartbeat(run) == {
        "curriculum": {"stage": 1, "env_id": "CartPole-v0", "stage_steps": 4, "stage_episodes": 1}
    }
    section = plugin.mosaic_build_manifest(run, "completed")["curriculum"]
    json.dumps(section)  # JSON-ready
    assert section["stage"] == 1 and section["env_id"] == "CartPole-v0"
    assert section["total_steps"] == 132
    assert [p["steps"] for p in section["progress"]] == [128, 4, 0]
    assert [p["episodes"] for p in section["progress"]] == [2, 1, 0]
    assert section["stages"][0] == {"env_id": "CartPole-v1", "until": "steps>=100", "return_window": 100}
    assert section["stages"][2]["until"] is None
    assert [t["stage"] for t in section["transitions"]] == [1]
    plugin.mosaic_run_finished(run, "completed")
    assert not stage_path(run.run_dir).exists()


def test_no_schedule_no_curriculum(tmp_path):
    config = WorkerConfig(run_id="r2", algo="ppo", env_id="CartPole-v1", total_timesteps=10)
    ctx = RunContext(config=config, directory=RunDirectory.for_run(tmp_path, "r2").create(), worker="cleanrl")
    plugin.mosaic_run_started(ctx)  # no emitter needed: nothing is emitted
    plugin.mosaic_on_child_message(ctx, "curriculum", {"stage": 0, "steps": 5})
    assert plugin.mosaic_on_heartbeat(ctx) is None
    assert plugin.mosaic_build_manifest(ctx, "completed") is None
    plugin.mosaic_run_finished(ctx, "completed")
    assert list(ctx.run_dir.iterdir()) == [ctx.directory.logs]


def test_stage_file_is_shared_with_other_processes(tmp_path):
    path = stage_path(tmp_path)
    writer = StageFile.create(path)
    code = (
        "import sys; from pathlib import Path; from mosaic_curriculum.stagefile import StageFile;"
        "f = StageFile.open(Path(sys.argv[1])); print(f.read(), flush=True); sys.stdin.readline(); print(f.read())"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert reader.stdout.readline().strip() == "0"
    writer.write(3)  # the reader's mapping sees the new word without reopening the file
    out, _ = reader.communicate("\n", timeout=30)
    assert out.strip() == "3"
    writer.remove()
    assert not path.exists()


def test_stage_file_checks_its_header_and_mode(tmp_path):
    bad = tmp_path / "curriculum.stage"
    bad.write_bytes(b"NOPE" + bytes(12))
    with pytest.raises(ValueError, match="not a curriculum stage file"):
        StageFile.open(bad)
    StageFile.create(bad, stage=2).close()
    reader = StageFile.open(bad)
    assert reader.read() == 2
    with pytest.raises(PermissionError):
        reader.write(1)
    reader.close()


def test_an_evaluation_ignores_the_schedule(tmp_path):
    extras = {"curriculum_schedule": [], "mode": "policy_eval"}  # not even validated
    config = WorkerConfig(run_id="r3", algo="ppo", env_id="CartPole-v1", total_timesteps=10, extras=extras)
    assert plugin.mosaic_validate_config(config) is None
    ctx = RunContext(config=config, directory=RunDirectory.for_run(tmp_path, "r3").create(), worker="cleanrl")
    plugin.mosaic_run_started(ctx)
    assert plugin.mosaic_build_manifest(ctx, "completed") is None
    assert not stage_path(ctx.run_dir).exists()


def test_importing_the_plugin_stays_light():
    code = (
        "import sys, mosaic_curriculum.plugin, mosaic_curriculum.schedule, mosaic_curriculum.control;"
        "print([m for m in ('gymnasium', 'numpy', 'torch', 'tensorboard', 'tensorboardX') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
