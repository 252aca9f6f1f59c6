"""``--name EXP``: an interrupted run of an experiment is resumed from its latest checkpoint;
a completed one gives way to a new run; ``--restart`` starts afresh. Through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from tests.conftest import BIN, HOST_VARS

PPO = [
    "run",
    "--worker",
    "cleanrl",
    "--algo",
    "ppo",
    "--env-id",
    "CartPole-v1",
    "--num-envs",
    "2",
    "--num-steps",
    "64",
    "--checkpoint-frequency",
    "256",
    "--name",
    "exp1",
]


def first_step(run_dir) -> int:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list(run_dir.rglob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
    acc.Reload()
    return min(e.step for e in acc.Scalars("charts/SPS"))


def test_name_resumes_an_interrupted_run_from_its_checkpoint(mosaic, workdir, runs_root):
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *PPO, "--total-timesteps", "500000", "--run-id", "first", "--json"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    saved = None
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "checkpoint_saved":
            saved = event["payload"]
            proc.send_signal(signal.SIGTERM)
            break
    rest = [json.loads(line) for line in proc.stdout.read().splitlines()]
    assert proc.wait(timeout=60) == 130 and saved is not None
    at_stop = [e["payload"] for e in rest if e["event"] == "checkpoint_saved"]  # the cancel saved the model too
    saved = max([saved, *at_stop], key=lambda payload: payload["global_step"])
    step = saved["global_step"]

    dry = mosaic(*PPO, "--total-timesteps", "2048", "--dry-run")
    assert dry.returncode == 0 and f"resuming interrupted run first from its checkpoint at step {step}" in dry.stderr

    resumed = mosaic(*PPO, "--total-timesteps", str(step + 512), "--run-id", "second", "--json")
    assert resumed.returncode == 0, resumed.stderr
    started = resumed.events[0]["payload"]
    assert started["experiment"]["action"] == "resume" and started["experiment"]["previous_run"] == "first"
    assert started["argv"][-1] == f"--resume-from={saved['path']}"
    assert first_step(runs_root / "second") > step  # TensorBoard: training went on from the checkpoint
    assert json.loads((runs_root / "second" / "config.json").read_text())["extras"]["experiment_name"] == "exp1"

    after = mosaic(*PPO, "--dry-run")
    assert after.returncode == 0 and "its latest run second completed; starting a new run" in after.stderr
    fresh = mosaic(*PPO, "--restart", "--dry-run", "--emit-summary")
    assert json.loads(fresh.stdout)["experiment"]["action"] == "restart"


def test_name_errors_are_one_line(mosaic, runs_root):
    bad = mosaic(*PPO, "--name", "../x", "--dry-run")
    assert bad.returncode == 2 and "experiment name (--name / extras.experiment_name) must be" in bad.stderr
    assert not runs_root.exists()
