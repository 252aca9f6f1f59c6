"""Atari and MuJoCo through the real `mosaic run`: skipped, with the reason, when an extra is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

MOSAIC = Path(sys.executable).parent / "mosaic"
GYMNASIUM_1 = int(gym.__version__.split(".")[0]) >= 1
# MuJoCo ids: v4 on gymnasium 0.29.1, v5 on 1.x (the versions each lane's CleanRL users train on)
MUJOCO_VERSION = "v5" if GYMNASIUM_1 else "v4"


def extra_missing(module: str, extra: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"the '{extra}' extra is not installed (make extras EXTRAS={extra})",
    )


needs_atari = extra_missing("ale_py", "atari")
needs_mujoco = extra_missing("mujoco", "mujoco")


def clean_environ(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WANDB_", "CLEANRL_FASTLANE_", "MOSAIC_")) and k != "MUJOCO_GL"
    }
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def mosaic_command(run_id: str, algo: str, env_id: str, total: int, extras: dict, *more: str) -> list[str]:
    return [
        str(MOSAIC),
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        algo,
        "--env-id",
        env_id,
        "--total-timesteps",
        str(total),
        "--run-id",
        run_id,
        "--quiet",
        "--extras",
        json.dumps({"cuda": False, **extras}),
        *more,
    ]


def start(workdir: Path, *command: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        list(command),
        cwd=workdir,
        env=clean_environ(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 400) -> tuple[list[dict], str]:
    out, err = proc.communicate(timeout=timeout)
    return [json.loads(line) for line in out.splitlines() if line.strip()], err


def completed(proc: subprocess.Popen, timeout: float = 400) -> list[dict]:
    events, err = finish(proc, timeout)
    assert events and events[-1]["event"] == "run_completed", err[-3000:]
    return events


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag under ``run_dir`` (one TensorBoard run), read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (tb_dir,) = {p.parent for p in run_dir.rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def wait_for_frame(run_id: str, proc: subprocess.Popen, timeout: float = 240):
    """The first FastLane frame of a running run, read by ``mosaic_fastlane.FastLaneReader``."""
    from mosaic_fastlane import FastLaneReader
    from mosaic_fastlane.segment import SegmentMissing

    deadline = time.monotonic() + timeout
    reader = None
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before its first frame: {proc.communicate()[1][-3000:]}")
            try:
                reader = reader or FastLaneReader(run_id)
                if reader.frames_published() >= 1:
                    return reader.read_slot(0)
            except SegmentMissing:
                pass
            time.sleep(0.05)
    finally:
        if reader is not None:
            reader.close()
    raise AssertionError(f"no frame from run {run_id} within {timeout} s")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def runs_root(workdir: Path) -> Path:
    return workdir / "var" / "trainer" / "runs"
