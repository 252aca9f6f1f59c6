"""`mosaic experiment run SPEC --target` through a real `mosaic daemon` (loopback, its client
token): SIGTERM to the experiment while its second seed trains cancels that run through the
daemon; the same command again skips the completed seeds and submits the cancelled one with its
run id, which the daemon resumes (`run_resumed`, "resubmitted; it resumes" in its log); then
`mosaic compare` of the experiment over the daemon's runs root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosaic_core.events import metric_steps, read_events
from tests.conftest import BIN, HOST_VARS, run_cli
from tests.trainer.conftest import DaemonProcess

SPEC = """
name = "on-daemon"
seeds = [1, 2]
total_timesteps = 12000
parallel = 1

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
overrides = { num_envs = 2, num_steps = 128, update_epochs = 1 }

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
overrides = { num_envs = 2, num_steps = 128, update_epochs = 1, learning_rate = 0.001 }
"""


def newest_step(run_dir: Path) -> int:
    return max(metric_steps(read_events(run_dir / "events.jsonl")), default=0)


@pytest.fixture
def daemon(tmp_path):
    process = DaemonProcess(
        [
            str(Path(sys.executable).with_name("mosaic")),
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path / "state"),
            "--grace-period",
            "30",
            "--max-concurrent",
            "2",
        ],
        tmp_path,
    )
    yield process
    process.stop()


@pytest.mark.slow
def test_an_experiment_runs_through_the_daemon_resumes_there_and_compares(tmp_path, daemon):
    from mosaic_experiments.spec import load

    (tmp_path / "spec.toml").write_text(SPEC)
    exp = load(tmp_path / "spec.toml")
    runs = tmp_path / "state" / "runs"
    first, second = (runs / exp.run_id(exp.groups[0], seed) for seed in exp.seeds)
    argv = ["experiment", "run", "spec.toml", "--target", daemon.target, "--state-dir", str(tmp_path / "state")]
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS and k != "MOSAIC_TOKEN"}
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 400
    while proc.poll() is None and time.monotonic() < deadline:
        if (second / "events.jsonl").is_file() and newest_step(second) >= 2000:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.kill(proc.pid, signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert f"submitted {second.name}" in err and f"on the daemon at {daemon.target}" in err
    cancelled = read_events(second / "events.jsonl")[-1]
    assert cancelled["event"] == "run_cancelled" and cancelled["payload"]["resumable"] is True, cancelled
    assert read_events(first / "events.jsonl")[-1]["event"] == "run_completed"
    first_events = (first / "events.jsonl").read_text()

    again = run_cli(argv, cwd=tmp_path, env={"MOSAIC_TOKEN": ""}, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 of 4 runs completed already, 3 to run on the daemon" in again.stderr
    assert f"resumed {second.name}" in again.stderr and f"{second.name}: completed" in again.stderr
    assert f"run {second.name}: resubmitted; it resumes" in daemon.log()
    events = read_events(second / "events.jsonl")
    resumed = [e for e in events if e["event"] == "run_resumed"]
    assert len(resumed) == 1 and resumed[0]["payload"]["from_step"] == cancelled["payload"]["from_step"]
    assert events[-1]["event"] == "run_completed" and not (runs / f"{second.name}-a2").exists()
    assert (first / "events.jsonl").read_text() == first_events  # not run again
    assert f"mosaic compare on-daemon --runs-dir {runs}" in again.stderr

    extras = [json.loads((d / "config.json").read_text())["extras"] for d in runs.iterdir()]
    assert {e["experiment"] for e in extras} == {"on-daemon"}
    assert {e["experiment_group"] for e in extras} == {g.label for g in exp.groups}
    compared = run_cli(["compare", "on-daemon", "--runs-dir", str(runs), "--reps", "200", "--json"], cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    groups = json.loads(compared.stdout)["sections"]["CartPole-v1"]["groups"]
    assert sorted(g["runs"] for g in groups.values()) == [2, 2] and "4 runs in 2 groups" in compared.stderr

    third = run_cli(argv, cwd=tmp_path, env={"MOSAIC_TOKEN": ""})
    assert third.returncode == 0 and "4 of 4 runs completed already, 0 to run" in third.stderr


def test_daemon_options_refused_in_one_line(tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC)
    cases = [
        (["--target", "127.0.0.1:1", "--runs-dir", "runs"], "--runs-dir"),
        (["--target", "127.0.0.1:1", "--launcher", "nosuch"], "nosuch"),
        (["--target", "no-port"], "HOST:PORT"),
        (["--target", "127.0.0.1:1", "--ray-address", "127.0.0.1:1"], "--launcher ray"),
        (["--state-dir", "state"], "--target"),
        (["--target", "127.0.0.1:1", "--state-dir", "state"], "client token"),
        (["--target", "127.0.0.1:1", "--token-file", "x"], "client token"),
    ]
    for extra, word in cases:
        result = run_cli(["experiment", "run", "spec.toml", *extra], cwd=tmp_path, env={"MOSAIC_TOKEN": ""})
        assert result.returncode == 2, (extra, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0] and "Traceback" not in result.stderr, (extra, result.stderr)
    nobody = run_cli(
        ["experiment", "run", "spec.toml", "--target", "127.0.0.1:1"], cwd=tmp_path, env={"MOSAIC_TOKEN": "t"}
    )
    assert nobody.returncode == 1 and nobody.stderr.count("\n") == 1, nobody.stderr
    assert "no trainer daemon answered at 127.0.0.1:1" in nobody.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]  # nothing written
