"""The public training-process API (``mosaic_core.child``): a program whose env bypasses
``gym.make`` (as PettingZoo, EnvPool or a Ray env runner do) publishes frames and per-agent scalars
itself, and gets FastLane, the metric bridge and the manifest like a wrapped env.

The example worker's ``--direct`` mode builds CartPole from its class, renders only when
``frame_wanted()`` says so, hands frames to ``publish_frame`` and reports its returns both as the
run's and as agent ``player``'s."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, run_cli


def test_frames_and_agent_scalars_published_through_the_api_reach_fastlane_and_the_bridge(workdir, runs_root):
    from mosaic_fastlane import FastLaneReader

    extras = {"fastlane": True, "metrics_interval_s": 0.05}
    proc = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--direct",
            "--total-timesteps",
            "60000",
            "--run-id",
            "api",
            "--extras",
            json.dumps(extras),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    frame = None
    try:
        deadline = time.monotonic() + 60
        while frame is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with FastLaneReader("api") as reader:
                    frame = reader.wait(timeout=5)
            except Exception:  # the segment appears once the run has started
                time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert frame is not None and frame.pixels.ndim == 3 and frame.global_step > 0
    events = [json.loads(line) for line in out.splitlines()]
    metrics = [e["payload"] for e in events if e["event"] == "metrics"]
    last = metrics[-1]
    # the agent's series is its own: the run's return is the team's, never the agent's mixed in
    assert last["agents"]["player"]["charts/episodic_return"] > 0 and last["episodic_return"] > 0
    assert not any(tag.startswith("agents/") for tag in last["scalars"])
    manifest = json.loads((runs_root / "api" / "manifest.json").read_text())
    assert manifest["fastlane"]["frames_published"] > 0 and manifest["plugins"]["hook_failures"] == []
    assert not list(Path("/dev/shm").glob("*api*"))


def test_the_api_is_a_no_op_outside_a_run(workdir):
    done = subprocess.run(
        [
            str(BIN / "python"),
            "-c",
            "import numpy as np\n"
            "from mosaic_core.child import frame_wanted, publish_frame, report_scalar\n"
            "assert frame_wanted() is False\n"
            "publish_frame(np.zeros((4, 4, 3), np.uint8)); report_scalar('x', 1.0, 1, agent='a')\n"
            "print('ok')",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_frames_are_throttled_to_the_fastlane_interval(workdir, runs_root):
    """The program asks before rendering: with a 1 s interval a 2-3 s run publishes a handful of
    frames, not one per step."""
    done = run_cli(
        [
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--direct",
            "--total-timesteps",
            "30000",
            "--run-id",
            "slow",
            "--extras",
            json.dumps({"fastlane": True}),
        ],
        cwd=workdir,
        env={"CLEANRL_FASTLANE_INTERVAL_MS": "1000"},
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((runs_root / "slow" / "manifest.json").read_text())
    seconds = done.events[-1]["timestamp"] - done.events[0]["timestamp"]
    assert 1 <= manifest["fastlane"]["frames_published"] <= 2 + seconds < 30000 / 100


def test_host_cancel_stops_at_once_before_the_loop_and_at_its_next_check_within_it():
    """``HostCancel``: a SIGTERM before ``looping()`` raises ``Stopped`` where the program is; in
    the loop it is only recorded until ``check()``; the exit code is the shell's 128 + signal."""
    import os
    import signal

    import pytest

    from mosaic_core.child import HostCancel, Stopped

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        early = HostCancel().install()
        with pytest.raises(Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode
        assert early.requested and early.exit_code() == 128 + signal.SIGTERM
        with pytest.raises(Stopped):
            early.looping()  # the cancel came before the loop: it does not start

        looping = HostCancel().install()
        looping.looping()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert looping.requested and looping.signal == signal.SIGINT
        with pytest.raises(Stopped):
            looping.check()
        assert looping.exit_code() == 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
