"""Paths and run ids a user can paste back: a run's config.json repeats it, ``--from`` takes an
id prefix, the runs root is found from any subfolder, ``mosaic logs`` follows a run."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import BIN

EXAMPLE = ["run", "--worker", "example", "--env-id", "CartPole-v1"]


def test_a_recorded_run_repeats_and_ids_need_only_a_prefix(mosaic, workdir, runs_root):
    first = mosaic(
        *EXAMPLE,
        "--total-timesteps",
        "200",
        "--run-id",
        "origin-run",
        "--extras",
        '{"thresh_level": 2, "wandb_api_key": "sk-never-on-disk"}',
    )
    assert first.returncode == 0, first.stderr
    recorded = json.loads((runs_root / "origin-run" / "config.json").read_text())
    assert recorded["worker"] == "example" and recorded["extras"]["wandb_api_key"] == "***"
    again = mosaic(*EXAMPLE, "--config", str(runs_root / "origin-run" / "config.json"))
    assert again.returncode == 0, again.stderr
    started = again.events[0]
    assert started["run_id"] != "origin-run" and started["payload"]["total_timesteps"] == 200
    repeated = json.loads((runs_root / started["run_id"] / "config.json").read_text())
    assert repeated["extras"] == {"thresh_level": 2}  # the redacted secret is not replayed as "***"
    from_prefix = mosaic(*EXAMPLE, "--from", "origin", "--total-timesteps", "300")
    assert from_prefix.returncode == 0 and from_prefix.events[0]["payload"]["total_timesteps"] == 300
    wrong = mosaic("run", "--worker", "cleanrl", "--from", "origin")
    assert wrong.returncode == 2 and "is for worker 'example', not 'cleanrl'" in wrong.stderr
    logs = mosaic("logs", "origin")
    assert logs.returncode == 0 and "run_started" in logs.stdout and "run_completed" in logs.stdout
    shown = mosaic("runs", "show", "origin", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["summary"]["run_id"] == "origin-run"


def test_the_runs_root_is_found_from_a_subfolder(mosaic, workdir):
    assert mosaic(*EXAMPLE, "--total-timesteps", "100", "--run-id", "rooted").returncode == 0
    deep = workdir / "notebooks" / "week1"
    deep.mkdir(parents=True)
    result = subprocess.run([str(BIN / "mosaic"), "logs", "root"], cwd=deep, capture_output=True, text=True)
    assert result.returncode == 0 and "run_completed" in result.stdout, result.stderr


def test_logs_follow_a_live_run_until_it_ends(workdir):
    run = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            *EXAMPLE,
            "--total-timesteps",
            "20000",
            "--run-id",
            "live",
            "--extras",
            '{"metrics_interval_s": 0.1}',
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
    )
    try:
        follow = subprocess.run(
            [str(BIN / "mosaic"), "logs", "live", "--follow"], cwd=workdir, capture_output=True, text=True, timeout=120
        )
    finally:
        run.wait(timeout=120)
    assert follow.returncode == 0, follow.stderr
    lines = follow.stdout.splitlines()
    assert "run_started" in lines[0] and "run_completed" in lines[-1] and any("metrics" in line for line in lines)
