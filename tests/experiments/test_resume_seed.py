"""An interrupted seed of an experiment resumes through the run contract, for real: SIGTERM to
the `mosaic experiment run` process group while the second seed trains, then the same command
again: that seed's run (the same run id) shows `run_resumed` and completes; the first seed, which
had completed, is not run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from mosaic_core.events import metric_steps, read_events
from tests.conftest import BIN, HOST_VARS, run_cli

SPEC = """
name = "cut"
seeds = [1, 2]
total_timesteps = 12000
parallel = 1

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
overrides = { num_envs = 2, num_steps = 128, update_epochs = 1 }
"""


def metric_step(run_dir) -> int:
    """The newest env step the run reported (0 before its first metrics)."""
    return max(metric_steps(read_events(run_dir / "events.jsonl")), default=0)


@pytest.mark.slow
def test_an_interrupted_seed_resumes_and_a_completed_one_is_not_run_again(tmp_path):
    from mosaic_experiments.spec import load

    (tmp_path / "spec.toml").write_text(SPEC)
    exp = load(tmp_path / "spec.toml")
    root = tmp_path / "runs"
    first, second = (root / exp.run_id(exp.groups[0], seed) for seed in exp.seeds)
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), "experiment", "run", "spec.toml", "--runs-dir", str(root)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 400
    while proc.poll() is None and time.monotonic() < deadline:
        if (second / "events.jsonl").is_file() and metric_step(second) >= 4000:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.killpg(proc.pid, signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    cancelled = read_events(second / "events.jsonl")[-1]
    assert cancelled["event"] == "run_cancelled" and cancelled["payload"]["resumable"] is True, cancelled
    assert read_events(first / "events.jsonl")[-1]["event"] == "run_completed"
    first_events = (first / "events.jsonl").read_text()

    again = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 of 2 runs completed already, 1 to run" in again.stderr
    assert f"resumed {second.name}" in again.stderr and f"{second.name}: completed" in again.stderr
    assert not (root / f"{second.name}-a2").exists()
    events = read_events(second / "events.jsonl")
    resumed = [e for e in events if e["event"] == "run_resumed"]
    assert len(resumed) == 1 and resumed[0]["payload"]["from_step"] == cancelled["payload"]["from_step"]
    assert events[-1]["event"] == "run_completed"
    assert (first / "events.jsonl").read_text() == first_events  # not run again
    listed = json.loads(run_cli(["runs", "--runs-dir", str(root), "--json"], cwd=tmp_path).stdout)
    assert sorted(r["status"] for r in listed) == ["completed", "completed"]
