"""A newcomer's first runs: a default worker and `--env`, the final model kept by default (and on
Ctrl-C), `mosaic enjoy` right after training, and a config the training process refuses reported
as a configuration error (one line, exit 2, `run_failed` with `error_kind: config`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mosaic_core.choice import choose_worker
from mosaic_core.errors import UsageError
from mosaic_core.workers import discover_workers
from tests.conftest import BIN

ENVS = Path(__file__).parents[1] / "fixtures" / "envs"
TINY = [
    "--algo",
    "ppo",
    "--env",
    "CartPole-v1",
    "--total-timesteps",
    "256",
    "--num-envs",
    "1",
    "--num-steps",
    "128",
    "--update-epochs",
    "1",
]


def test_a_run_without_worker_goes_to_the_one_installed_worker_and_env_is_env_id(mosaic, tmp_path):
    # No worker environment built (an empty $MOSAIC_VENVS): CleanRL is the one worker that can run.
    rule = {"MOSAIC_DEFAULT_WORKER": "", "MOSAIC_VENVS": str(tmp_path / "venvs")}
    done = mosaic("run", "--algo", "ppo", "--env", "CartPole-v1", "--dry-run", "--emit-summary", env=rule)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["worker"] == "cleanrl" and summary["config"]["env_id"] == "CartPole-v1"
    assert summary["argv"][-1] == "--save-model"  # the final model is kept by default
    named = mosaic("run", "--algo", "ppo", "--env", "CartPole-v1", "--dry-run", env={"MOSAIC_DEFAULT_WORKER": "nope"})
    assert named.returncode == 2 and named.stderr.startswith("mosaic: error: unknown worker 'nope'; installed workers:")
    no_env = mosaic("run", "--algo", "ppo", "--dry-run", "--emit-summary")  # the script's own env_id default
    assert no_env.returncode == 0 and json.loads(no_env.stdout)["env_id"] == "CartPole-v1", no_env.stderr
    no_algo = mosaic("run", "--worker", "cleanrl", "--env", "CartPole-v1", "--dry-run")
    assert no_algo.returncode == 2 and "missing required field(s) algo" in no_algo.stderr


def test_the_default_worker_rule_leaves_examples_out_and_says_when_it_cannot_choose(monkeypatch, tmp_path):
    monkeypatch.delenv("MOSAIC_DEFAULT_WORKER", raising=False)
    monkeypatch.setenv("MOSAIC_VENVS", str(tmp_path / "venvs"))  # no worker environment built
    items = discover_workers()
    assert choose_worker(items) == "cleanrl"  # example workers and workers without their environment don't count
    cleanrl = next(i for i in items if i.name == "cleanrl")
    twin = type(cleanrl)(**{**vars(cleanrl), "name": "cleanrl2"})
    with pytest.raises(
        UsageError,
        match=r"a run with no --algo fits 2 installed workers: cleanrl \(c51, .*\); "
        r"cleanrl2 \(.*\); give --worker NAME or set \$MOSAIC_DEFAULT_WORKER",
    ):
        choose_worker([*items, twin])
    monkeypatch.setenv("MOSAIC_DEFAULT_WORKER", "cleanrl2")
    assert choose_worker([*items, twin]) == "cleanrl2"


def test_no_save_keeps_no_model_and_contradicting_it_is_refused(mosaic):
    argv = json.loads(mosaic("run", *TINY, "--no-save", "--dry-run", "--emit-summary").stdout)["argv"]
    assert argv[-1] == "--no-save-model" and "--save-model" not in argv
    both = mosaic("run", *TINY, "--no-save", "--extras", '{"save_model": true}', "--dry-run")
    assert both.returncode == 2 and both.stderr == "mosaic: error: --no-save and save_model true disagree; give one\n"


@pytest.mark.slow
def test_a_default_run_keeps_its_final_model_and_enjoy_plays_it(mosaic, runs_root):
    done = mosaic("run", *TINY, "--run-id", "first")
    assert done.returncode == 0, done.stderr
    saved = [e["payload"] for e in done.events if e["event"] == "checkpoint_saved"]
    # the run's last state in the worker's checkpoint layout (resumable), then its final model
    assert [p["global_step"] for p in saved] == [256, 256]
    assert saved[0]["path"].endswith("/checkpoints/step_256.cleanrl_model")
    assert saved[1]["path"].endswith("/ppo.cleanrl_model")
    enjoy = mosaic("enjoy", "first", "--episodes", "2", "--json")
    assert enjoy.returncode == 0, enjoy.stderr
    played = json.loads(enjoy.stdout)  # the evaluation's eval.json
    assert len(played["episodes"]) == 2 and played["global_step"] == 256
    assert played["checkpoint"].endswith("/checkpoints/step_256.cleanrl_model")
    listed = [r["run_id"] for r in json.loads(mosaic("runs", "--json").stdout)]
    assert listed == ["first"]  # an evaluation of its run, not a training run
    assert "2 episodes" in mosaic("runs", "show", "first").stdout


@pytest.mark.slow
def test_ctrl_c_saves_the_model_before_the_run_stops(workdir, runs_root):
    env = dict(os.environ)
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "run",
            "--algo",
            "ppo",
            "--env",
            "CartPole-v1",
            "--total-timesteps",
            "10000000",
            "--num-envs",
            "1",
            "--num-steps",
            "64",
            "--run-id",
            "stopped",
        ],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        events = runs_root / "stopped" / "events.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and '"metrics"' not in (events.read_text() if events.exists() else ""):
            time.sleep(0.2)  # training has begun
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    records = [json.loads(line) for line in out.splitlines()]
    saved = [r["payload"] for r in records if r["event"] == "checkpoint_saved"]
    assert records[-1]["event"] == "run_cancelled" and len(saved) == 2, records[-3:]  # the layout's and the model
    assert 0 < saved[0]["global_step"] < 10_000_000 and all(Path(p["path"]).is_file() for p in saved)
    assert saved[0]["path"].endswith(f"/checkpoints/step_{saved[0]['global_step']}.cleanrl_model")
    assert (
        records[-1]["payload"]["resumable"] is True and records[-1]["payload"]["from_step"] == saved[0]["global_step"]
    )


def test_a_config_the_training_process_refuses_is_a_config_error(mosaic, runs_root):
    runs_root.mkdir(parents=True, mode=0o700)  # no note about a new runs root: stderr is the error alone
    done = mosaic(
        "run",
        "--algo",
        "ppo",
        "--env",
        "big_view_env:MiniGrid-BigView-v0",
        "--total-timesteps",
        "256",
        "--run-id",
        "big",
        env={"PYTHONPATH": str(ENVS)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "mosaic: error: ppo's image networks are MiniGrid's CNNs (7x7x3 observations); "
        "big_view_env:MiniGrid-BigView-v0 gives 16x16x3 images: for Atari frames use --algo ppo_atari "
        "(run big refused it before its first step)"
    ]
    final = done.events[-1]
    assert final["event"] == "run_failed" and final["payload"]["error_kind"] == "config"
    assert "stderr_tail" not in final["payload"] and final["payload"]["returncode"] == 2


def test_ppo_on_atari_frames_points_to_ppo_atari(mosaic, runs_root):
    pytest.importorskip("ale_py")
    for dry in ([], ["--dry-run"]):
        done = mosaic("run", "--algo", "ppo", "--env", "BreakoutNoFrameskip-v4", *dry)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "not image (atari): for these frames use --algo ppo_atari" in done.stderr
    assert not runs_root.exists()


def test_the_daemon_picks_the_worker_by_the_same_rule(monkeypatch, runs_root, tmp_path):
    from mosaic_core.errors import ConfigError
    from mosaic_core.trainer.submission import parse_submission

    config = json.dumps({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 64})
    monkeypatch.delenv("MOSAIC_DEFAULT_WORKER", raising=False)
    monkeypatch.setenv("MOSAIC_VENVS", str(tmp_path / "venvs"))  # no worker environment built
    assert parse_submission(config, "", discover_workers(), 0, runs_dir=runs_root).worker == "cleanrl"
    monkeypatch.setenv("MOSAIC_DEFAULT_WORKER", "nope")
    with pytest.raises(ConfigError, match=r"unknown worker 'nope'.*field 'worker'"):
        parse_submission(config, "", discover_workers(), 0, runs_dir=runs_root)


def test_the_library_loads_the_daemons_worker_json(tmp_path):
    from cleanrl_worker.config import load_worker_config

    path = tmp_path / "worker.json"  # as the README shows it for `mosaic submit`: a worker key, no run_id
    path.write_text(
        json.dumps(
            {
                "worker": "cleanrl",
                "algo": "ppo",
                "env_id": "CartPole-v1",
                "total_timesteps": 50000,
                "extras": {"algo_params": {"num_envs": 4}},
            }
        )
    )
    config = load_worker_config(path)
    assert (config.algo, config.total_timesteps, len(config.run_id)) == ("ppo", 50000, 26)
    path.write_text(json.dumps({"worker": "xuance", "algo": "mappo", "env_id": "x", "total_timesteps": 1}))
    with pytest.raises(UsageError, match="the config is for worker 'xuance', not 'cleanrl'"):
        load_worker_config(path)
