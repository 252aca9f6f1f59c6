"""Through the real `mosaic run`: live metrics while training, the progress bar at a terminal,
bad analytics extras, and W&B in offline mode with an API key that must never reach a file."""

import json
import os
import signal

import pytest

from mosaic_analytics import curves
from tests.analytics.conftest import TERMINAL, clean_env, read_events_until, run_args, run_with_tty_stderr, start
from tests.conftest import run_cli


def test_metrics_events_arrive_while_the_run_trains(workdir, runs_root):
    proc = start(run_args("live", 4000, {"step_delay": 0.002}, "--heartbeat-interval", "0.5"), workdir)
    events = read_events_until(proc, lambda e: e["event"] == "metrics")
    live = events[-1]
    # the run is still going: its own log has no terminal event yet
    logged = [json.loads(line)["event"] for line in (runs_root / "live" / "events.jsonl").read_text().splitlines()]
    assert live["event"] == "metrics" and not set(logged) & set(TERMINAL)
    assert 0 < live["payload"]["global_step"] < 4000 and live["payload"]["total_timesteps"] == 4000
    events += [json.loads(line) for line in proc.stdout]
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr.read()
    proc.stderr.close()
    assert events[-1]["event"] == "run_completed"
    metrics = [e["payload"] for e in events if e["event"] == "metrics"]
    steps = [m["global_step"] for m in metrics]
    assert len(metrics) >= 2 and steps == sorted(steps) and steps[-1] > 3900
    assert metrics[-1]["episodic_return"] > 0 and metrics[-1]["episodes"] > 0 and metrics[-1]["sps"] > 0
    beats = [e["payload"] for e in events if e["event"] == "heartbeat"]
    assert beats and all("global_step" in b["metrics"] for b in beats)


@pytest.mark.parametrize("writer", ["torch", "tensorboardx"])
def test_a_run_stopped_at_its_first_metric_keeps_that_scalar_in_its_event_file(workdir, runs_root, writer):
    # tensorboardX writes nothing before a flush, torch's writer a moment after add_scalar: killed
    # at the host's stop, an unmodified script kept neither; its writers are closed first now
    proc = start(run_args("cut", 100_000, {"step_delay": 0.01, "writer": writer}), workdir)
    first = read_events_until(proc, lambda e: e["event"] == "metrics")[-1]["payload"]
    proc.send_signal(signal.SIGINT)
    assert [json.loads(line) for line in proc.stdout][-1]["event"] == "run_cancelled"
    proc.wait(timeout=60)
    proc.stderr.close()
    kept = curves.read_scalars(runs_root / "cut", curves.DEFAULT_TAG)
    assert first["episodic_return"] in kept.values and not kept.damaged


@pytest.mark.parametrize("writer", ["torch", "tensorboardx"])
def test_a_stop_right_after_a_scalar_keeps_it(mosaic, runs_root, writer):
    # The stop comes before the writer's thread has written the step's scalars, as on a busy machine:
    # tensorboardX queues them for that thread, and its flush writes only what the thread has taken.
    result = mosaic(*run_args("late", 100_000, {"writer": writer, "sigterm_at": 64}), env=clean_env())
    assert result.returncode != 0 and result.events[-1]["event"] in TERMINAL, result.stderr[-2000:]
    kept = curves.read_scalars(runs_root / "late", "losses/value_loss")
    assert kept.steps[-1] == 64 and not kept.damaged, kept
    assert "Traceback" not in (runs_root / "late" / "logs" / "cleanrl.stderr.log").read_text()


def test_metrics_interval_bounds_the_event_rate(mosaic):
    result = mosaic(*run_args("slow-metrics", 1000, {"metrics_interval_s": 3600}), env=clean_env())
    assert result.returncode == 0, result.stderr
    metrics = [e for e in result.events if e["event"] == "metrics"]
    # the first batch, then nothing for an hour, except the final values just before the end
    assert 1 <= len(metrics) <= 2 and result.events[-2]["event"] == "metrics"


def test_progress_bar_at_a_terminal_and_pure_jsonl_on_stdout(workdir):
    result = run_with_tty_stderr(run_args("bar", 3000, {"step_delay": 0.001, "writer": "tensorboardx"}), workdir)
    assert result.returncode == 0, result.terminal[-2000:]
    assert [e["event"] for e in result.events][-1] == "run_completed"  # every stdout line parses as JSON
    assert "steps" in result.terminal and "SPS" in result.terminal and "ETA" in result.terminal
    assert "/3000" in result.terminal and "(completed)" in result.terminal
    assert any(e["event"] == "metrics" for e in result.events)  # tensorboardX scalars are bridged too


def test_no_bar_when_quiet_or_not_a_terminal(workdir, mosaic):
    quiet = run_with_tty_stderr(run_args("hushed", 500, None, "--quiet"), workdir)
    assert quiet.returncode == 0 and "SPS" not in quiet.terminal and "━" not in quiet.terminal
    piped = mosaic(*run_args("piped", 500), env=clean_env())
    assert piped.returncode == 0 and "━" not in piped.stderr and "SPS" not in piped.stderr


def test_paths_outside_the_run_dir_are_a_config_error(mosaic, workdir):
    for key, value in (
        ("tensorboard_dir", "../../etc"),
        ("checkpoints_dir", "/etc"),
        ("optuna_db", "sqlite:///../x.db"),
    ):
        result = mosaic(*run_args("escape", 100, {key: value}), env=clean_env())
        assert result.returncode == 2 and result.stdout == ""
        assert f"extras.{key}" in result.stderr and "outside the run directory" in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in workdir.iterdir()) == []  # nothing was created


def test_wandb_offline_run_never_writes_the_api_key(workdir, runs_root, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    env_key = "ENVKEY" + "0123456789abcdef" * 2 + "0a1b"
    extras_key = "XTRAKEY" + "fedcba9876543210" * 2 + "9z8"
    extras = {
        "track_wandb": True,
        "wandb_project_name": "mosaic-tests",
        "wandb_entity": "lab",
        "wandb_run_name": "tiny-offline",
        "wandb_api_key": extras_key,
        "notes": "offline check",
    }
    env = clean_env(WANDB_MODE="offline", WANDB_API_KEY=env_key, HOME=str(home))
    result = run_cli(run_args("tracked", 600, extras), cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr
    run_dir = runs_root / "tracked"
    section = json.loads((run_dir / "manifest.json").read_text())["wandb"]
    assert section["mode"] == "offline" and section["run_name"] == "tiny-offline"
    assert section["project"] == "mosaic-tests" and section["entity"] == "lab"
    assert section["run_path"] == f"lab/mosaic-tests/{section['run_id']}"
    assert section["dir"].startswith("wandb/offline-run-") and (run_dir / section["dir"]).is_dir()
    assert any(p.name.endswith(".wandb") for p in (run_dir / section["dir"]).iterdir())
    config = json.loads((run_dir / "launch.json").read_text())
    assert "--track" in config["argv"] and "--wandb-project-name=mosaic-tests" in config["argv"]
    # every byte of every file the run left, and the output streams
    files = [os.path.join(root, name) for root, _dirs, names in os.walk(run_dir) for name in names]
    assert len(files) > 5
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        for key in (env_key, extras_key):
            assert key.encode() not in data, f"API key found in {path}"
    for key in (env_key, extras_key):
        assert key not in result.stdout and key not in result.stderr
    assert list(home.iterdir()) == []  # nothing written outside the run dir
