"""MOSAIC's analytics manifest: ``analytics.json`` under ``var/trainer/runs/<run_id>/``, written at
the end of every run (seeds 000 "Analytics manifest (build_manifest)", 001 "on completion writes an
analytics.json manifest", 002 "writes analytics.json into var/trainer/runs/<run_id>/", 003 "artifact
manifest schema (tensorboard_dir, wandb_run_id, optuna_db_path, checkpoints)"), carried by
``run_completed`` ("completion includes analytics manifest"), and ``build_manifest(run_dir, extras)``.

Real runs only: ``python -m cleanrl_worker.cli --config worker.json`` (tiny PPO, made once for the
module), ``mosaic run`` of CleanRL PPO, a script that fails and one that is cancelled; every file is
read back from disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, HOST_VARS, REPO, run_cli

SECRET = "sk-analytics-" + "q" * 24
ANALYTICS_EXTRAS = {
    "tensorboard_dir": "tb",
    "wandb_run_path": "team/demo/abc123",
    "wandb_entity": "team",
    "wandb_project": "demo",
    "optuna_db": "study.db",
    "checkpoints_dir": "ckpt",
    "notes": f"first try (key {SECRET} pasted by mistake)",
    "wandb_api_key": SECRET,
}
TINY_PPO = {"num_envs": 1, "num_steps": 128}
FAILING = """
import os, pathlib
os.makedirs("checkpoints", exist_ok=True)
pathlib.Path("checkpoints/step_5.pt").write_bytes(b"weights")
os.symlink(os.environ["PLANTED"], "tb")  # the configured TensorBoard dir, now a link out of the run
os.symlink(os.path.join(os.environ["PLANTED"], "victim.json"), "analytics.json")  # a link where it is written
raise RuntimeError("exploded after a checkpoint")
"""
SLEEPING = """
import pathlib, time
pathlib.Path("ready").write_text("1")
time.sleep(300)
"""


def python_m(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` for real, in ``cwd``, without the host's variables of the test process."""
    full_env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env={**full_env, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def terminal(events: list[dict]) -> dict:
    ends = [e for e in events if e["event"] in ("run_completed", "run_failed", "run_cancelled")]
    assert len(ends) == 1 and ends[0] is events[-1], [e["event"] for e in events]
    return ends[0]


def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def carried(payload: dict, analytics: dict) -> None:
    """The terminal event's payload carries the analytics manifest (MOSAIC's payload was it)."""
    for key in ("run_id", "status", "artifacts", "tensorboard_dir", "wandb_run_path", "optuna_db_path"):
        assert payload[key] == analytics[key], key
    assert payload["checkpoints_dir"] == analytics["checkpoints_dir"] and payload["notes"] == analytics["notes"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """MOSAIC's way: a worker.json and ``python -m cleanrl_worker.cli --config worker.json``."""
    folder = tmp_path_factory.mktemp("seeds")
    config = {
        "run_id": "seeded",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": 512,
        "seed": 1,
        "extras": {**TINY_PPO, **ANALYTICS_EXTRAS},
    }
    (folder / "worker.json").write_text(json.dumps(config))
    result = python_m("cleanrl_worker.cli", "--config", "worker.json", cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder / "var" / "trainer" / "runs" / "seeded", result


def test_a_cli_run_writes_analytics_json_in_mosaic_shape(cli_run):
    run_dir, _result = cli_run
    analytics = read(run_dir / "analytics.json")
    assert analytics["run_id"] == "seeded" and analytics["status"] == "completed"
    tensorboard = analytics["artifacts"]["tensorboard"]
    assert tensorboard["enabled"] is True and tensorboard["relative_path"] == "tb"
    assert tensorboard["log_dir"] == analytics["tensorboard_dir"] == str(run_dir / "tb")  # absolute, under the run
    assert tensorboard["event_dirs"] and all(d.startswith("tb/") for d in tensorboard["event_dirs"])
    assert list(Path(tensorboard["log_dir"]).rglob("events.out.tfevents.*")), "the script's events are there"
    assert analytics["artifacts"]["wandb"] == {
        "enabled": True,
        "run_path": "team/demo/abc123",
        "run_id": "abc123",
        "entity": "team",
        "project": "demo",
        "mode": None,  # not tracked here: the run names a W&B run
        "offline_dir": None,
    }
    assert analytics["wandb_run_path"] == "team/demo/abc123"
    assert analytics["artifacts"]["optuna"] == {
        "enabled": True,
        "db_path": str(run_dir / "study.db"),
        "relative_path": "study.db",
        "exists": False,
    }
    assert analytics["optuna_db_path"] == str(run_dir / "study.db")
    checkpoints = analytics["artifacts"]["checkpoints"]
    assert checkpoints["dir"] == analytics["checkpoints_dir"] == str(run_dir / "ckpt")
    assert checkpoints["enabled"] is True and checkpoints["files_total"] == len(checkpoints["files"]) > 0
    for entry in checkpoints["files"]:
        assert Path(entry["path"]).is_relative_to(run_dir) and Path(entry["path"]).exists()
    saved = [e["payload"] for e in events_of(run_dir) if e["event"] == "checkpoint_saved"]
    steps = {entry["step"] for entry in checkpoints["files"]}
    assert saved and {p["global_step"] for p in saved} <= steps  # each saved checkpoint, with its step
    assert analytics["notes"] == "first try (key *** pasted by mistake)"
    manifest = read(run_dir / "manifest.json")  # the host's manifest stays beside it, as it was
    assert manifest["schema"] == "mosaic.manifest/1" and manifest["wandb"]["run_path"] == "team/demo/abc123"


def test_the_run_completed_event_carries_it_on_stdout_and_in_events_jsonl(cli_run):
    run_dir, result = cli_run
    analytics = read(run_dir / "analytics.json")
    printed = terminal([json.loads(line) for line in result.stdout.splitlines()])
    logged = terminal(events_of(run_dir))
    assert printed == logged and logged["event"] == "run_completed"
    carried(logged["payload"], analytics)
    assert logged["payload"]["returncode"] == 0 and "logs" in logged["payload"]  # the host's fields stay


def test_no_secret_in_the_manifests_or_the_events(cli_run):
    """The API key, given as a key and pasted into the notes, is in none of them."""
    run_dir, result = cli_run
    assert SECRET not in result.stdout + result.stderr
    for name in ("analytics.json", "manifest.json", "events.jsonl"):
        assert SECRET not in (run_dir / name).read_text(), name


def test_mosaic_run_finds_the_tensorboard_files_where_the_worker_writes_them(workdir, mosaic, runs_root):
    """No analytics extras: CleanRL's own ``runs/<run_name>`` and the worker's ``checkpoints/``."""
    result = mosaic(
        "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "512",
        "--run-id", "plain", "--json", "--quiet", "--extras", json.dumps(TINY_PPO),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = runs_root / "plain"
    analytics = read(run_dir / "analytics.json")
    tensorboard = analytics["artifacts"]["tensorboard"]
    assert tensorboard["enabled"] is True and tensorboard["relative_path"].startswith("runs/")
    assert list(Path(tensorboard["log_dir"]).glob("events.out.tfevents.*"))
    assert analytics["artifacts"]["wandb"]["enabled"] is False and analytics["wandb_run_path"] is None
    assert analytics["artifacts"]["optuna"] == {
        "enabled": False,
        "db_path": None,
        "relative_path": None,
        "exists": False,
    }
    assert analytics["checkpoints_dir"] == str(run_dir / "checkpoints") and analytics["notes"] is None
    carried(terminal(result.events)["payload"], analytics)


def test_a_failed_run_writes_it_with_its_status_and_never_follows_a_planted_link(workdir, mosaic, runs_root, tmp_path):
    (workdir / "fail.py").write_text(FAILING)
    planted = tmp_path / "elsewhere"
    planted.mkdir()
    (planted / "events.out.tfevents.1.other").write_bytes(b"not this run's")
    (planted / "victim.json").write_text("untouched")
    extras = {"tensorboard_dir": "tb", "notes": "will fail", "wandb_api_key": SECRET}
    result = mosaic(
        "run", "--worker", "cleanrl", "--algo", "fail.py", "--env-id", "CartPole-v1", "--total-timesteps", "10",
        "--run-id", "failed", "--json", "--quiet", "--extras", json.dumps(extras), env={"PLANTED": str(planted)},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    run_dir = runs_root / "failed"
    analytics = read(run_dir / "analytics.json")
    assert analytics["status"] == "failed" and analytics["notes"] == "will fail"
    tensorboard = analytics["artifacts"]["tensorboard"]
    assert tensorboard["enabled"] is False and tensorboard["log_dir"] is None and analytics["tensorboard_dir"] is None
    assert tensorboard["error"] == "extras.tensorboard_dir resolves outside the run directory: left out"
    assert str(planted) not in (run_dir / "analytics.json").read_text()
    assert not (run_dir / "analytics.json").is_symlink() and (planted / "victim.json").read_text() == "untouched"
    assert analytics["artifacts"]["checkpoints"]["files"] == [
        {"path": str(run_dir / "checkpoints/step_5.pt"), "step": 5}
    ]
    end = terminal(result.events)
    assert end["event"] == "run_failed" and "exploded after a checkpoint" in end["payload"]["error"]
    carried(end["payload"], analytics)
    assert SECRET not in result.stdout + (run_dir / "analytics.json").read_text()


def test_a_cancelled_run_writes_it_with_its_status(workdir, runs_root):
    (workdir / "sleep.py").write_text(SLEEPING)
    args = [
        "run", "--worker", "cleanrl", "--algo", "sleep.py", "--env-id", "CartPole-v1", "--total-timesteps", "10",
        "--run-id", "stopped", "--json", "--quiet", "--grace-period", "2", "--extras", json.dumps({"notes": "stop me"}),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    host = subprocess.Popen(
        [str(BIN / "mosaic"), *args], cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not (runs_root / "stopped" / "ready").exists() and host.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    host.send_signal(signal.SIGTERM)
    out, err = host.communicate(timeout=120)
    assert host.returncode == 130, err[-3000:]
    analytics = read(runs_root / "stopped" / "analytics.json")
    assert analytics["status"] == "cancelled" and analytics["notes"] == "stop me"
    end = terminal([json.loads(line) for line in out.splitlines()])
    assert end["event"] == "run_cancelled" and "SIGTERM" in end["payload"]["reason"]
    carried(end["payload"], analytics)


def test_build_manifest_from_python_as_mosaic_calls_it(cli_run, tmp_path):
    from cleanrl_worker.analytics import AnalyticsManifest, build_manifest
    from mosaic_core import ConfigError

    run_dir, _result = cli_run
    copy = tmp_path / "elsewhere" / "seeded"
    shutil.copytree(run_dir, copy)
    (copy / "analytics.json").unlink()
    built = build_manifest(copy, extras=ANALYTICS_EXTRAS)  # MOSAIC's call: reads extras and the run directory
    assert isinstance(built, AnalyticsManifest) and built.to_dict() == read(copy / "analytics.json")
    original = json.loads((run_dir / "analytics.json").read_text().replace(str(run_dir), str(copy)))
    for name in ("tensorboard", "wandb", "optuna"):
        assert built["artifacts"][name] == original["artifacts"][name], name
    files = built["artifacts"]["checkpoints"]["files"]
    assert files and all(f in original["artifacts"]["checkpoints"]["files"] for f in files)  # what a scan finds
    assert built["checkpoints_dir"] == str(copy / "ckpt") and SECRET not in json.dumps(built)

    assert build_manifest(copy, extras={"notes": "again"}, run_id="seeded")["notes"] == "again"  # MOSAIC's run_id=
    with pytest.raises(ConfigError, match="run_id 'other' is not the run directory's name 'seeded'"):
        build_manifest(copy, extras={}, run_id="other")
    kept = (copy / "analytics.json").read_text()
    with pytest.raises(ConfigError, match=r"extras\.checkpoints_dir: '\.\./\.\./etc' points outside the run directory"):
        build_manifest(copy, extras={"checkpoints_dir": "../../etc"})
    assert (copy / "analytics.json").read_text() == kept  # refused: nothing written

    older = build_manifest(copy, {"notes": "our older call form"})  # returns manifest.json, as it did
    assert older["schema"] == "mosaic.manifest/1" and older == read(copy / "manifest.json")
    assert read(copy / "analytics.json")["notes"] == "our older call form"  # and writes analytics.json too


@pytest.mark.parametrize(
    "key, value", [("optuna_db", "../../outside.db"), ("checkpoints_dir", "/etc"), ("tensorboard_dir", "../tb")]
)
def test_a_path_out_of_the_run_directory_is_one_line(tmp_path, key, value):
    config = {
        "run_id": "escape",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": 512,
        "extras": {key: value},
    }
    (tmp_path / "worker.json").write_text(json.dumps(config))
    result = python_m("cleanrl_worker.cli", "--config", "worker.json", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"extras.{key}" in lines[0] and "outside the run directory" in lines[0] and "worker.json" in lines[0]
    assert not (tmp_path / "var" / "trainer" / "runs" / "escape").exists()


def test_readers_take_manifest_json_first_and_never_analytics_json_for_it(cli_run, tmp_path, workdir):
    """``mosaic runs show`` reads ``manifest.json``; a run left with only MOSAIC's ``analytics.json``
    is not read as our manifest, an old run whose ``analytics.json`` was our manifest still is."""
    run_dir, _result = cli_run
    root = tmp_path / "runs"
    for name in ("seeded", "only-mosaic", "old"):
        shutil.copytree(run_dir, root / name)
        (root / name / "events.jsonl").write_text(
            (run_dir / "events.jsonl").read_text().replace('"run_id": "seeded"', f'"run_id": "{name}"')
        )
    (root / "only-mosaic" / "manifest.json").unlink()
    (root / "old" / "manifest.json").rename(root / "old" / "analytics.json")  # our manifest, before the rename

    def shown(name: str) -> dict:
        result = run_cli(["runs", "show", name, "--runs-dir", str(root), "--json"], cwd=workdir)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["manifest"]

    assert shown("seeded")["schema"] == "mosaic.manifest/1"
    assert shown("only-mosaic") in (None, {})
    assert shown("old")["schema"] == "mosaic.manifest/1"


def test_the_analytics_plugin_checks_what_it_promises(cli_run, tmp_path):
    """The worker contract suite asks every plugin (``mosaic_check_run``): the check passes on the
    real run and names what is wrong with a damaged copy."""
    from mosaic_core.plugins import plugin_host

    run_dir, _result = cli_run
    assert plugin_host().check_run(run_dir) == []
    copy = tmp_path / "seeded"
    shutil.copytree(run_dir, copy)
    damaged = read(copy / "analytics.json")
    del damaged["artifacts"]["optuna"]
    (copy / "analytics.json").write_text(json.dumps(damaged))
    assert plugin_host().check_run(copy) == [
        "analytics: analytics.json: artifacts.optuna is not an object with 'enabled'"
    ]
    (copy / "analytics.json").unlink()
    [problem] = plugin_host().check_run(copy)
    assert problem.startswith("analytics: analytics.json: not readable JSON")


def test_the_schema_reference_shows_the_shape_a_run_writes(cli_run):
    """docs/reference/schemas.md (generated) shows analytics.json with the keys a real run writes."""
    run_dir, _result = cli_run
    page = (REPO / "docs" / "reference" / "schemas.md").read_text()
    section = page.split("#### Plugin `analytics`", 1)[1]
    example = json.loads(re.search(r"```json\n(.*?)\n```", section, re.S).group(1))

    def shape(value):
        if isinstance(value, dict):
            return {key: shape(item) for key, item in value.items()}
        return [shape(value[0])] if isinstance(value, list) and value else type(value).__name__

    real = shape(read(run_dir / "analytics.json"))
    documented = shape(example)
    for key in ("mode", "offline_dir"):  # null here: not tracked
        real["artifacts"]["wandb"][key] = documented["artifacts"]["wandb"][key]
    real["artifacts"]["optuna"]["exists"] = documented["artifacts"]["optuna"]["exists"]
    assert documented == real
