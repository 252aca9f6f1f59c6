"""A run on a shared machine: another user cannot speak on its side channel, nothing invalid
reaches its event stream, and killing its host leaves no process, no segment and a terminal
event that says what happened. The other user is ``nobody`` through ``setpriv``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosaic_core.config import check_run_id
from mosaic_core.errors import ConfigError
from mosaic_core.events import EventEmitter
from mosaic_core.runs import RunDirectory
from tests.conftest import BIN

SEND = (
    "import socket, sys; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
    "s.sendto(sys.argv[2].encode(), b'\\0' + sys.argv[1].encode())"
)
NOTE = json.dumps({"kind": "lifecycle", "payload": {"event": "note", "payload": {"text": "injected by {who}"}}})
needs_second_user = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to act as a second user"
)


def _channel_address(run_id: str, timeout: float = 60) -> str:
    """The run's side-channel address, as any user can read it in /proc/net/unix."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in Path("/proc/net/unix").read_text().splitlines():
            path = line.split()[-1] if len(line.split()) > 7 else ""
            if path.startswith(f"@mosaic/{run_id}/"):
                return path[1:]
        time.sleep(0.1)
    raise AssertionError("the run's side channel never appeared")


def _send(address: str, text: str, as_nobody: bool) -> None:
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_nobody else []
    subprocess.run([*prefix, sys.executable, "-c", SEND, address, text], check=True, timeout=30)


# The example worker's policy file for the victim run: it waits at its first step while HOLD exists,
# so the run (and its side channel) lasts until the test has sent everything, however busy the machine.
HELD_POLICY = """import os, time

HOLD = {hold!r}


def act(observation, action_space):
    while os.path.exists(HOLD):
        time.sleep(0.05)
    return action_space.sample()
"""


@needs_second_user
def test_another_user_cannot_inject_into_a_run(workdir, runs_root):
    hold, policy = workdir / "hold", workdir / "held.py"
    hold.touch()
    policy.write_text(HELD_POLICY.format(hold=str(hold)))
    run = subprocess.Popen(
        [str(BIN / "mosaic"), "run", "--worker", "example", "--algo", str(policy), "--env-id", "CartPole-v1",
         "--total-timesteps", "2000", "--run-id", "victim"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        address = _channel_address("victim")
        _send(address, NOTE.replace("{who}", "nobody"), as_nobody=True)
        _send(address, NOTE.replace("{who}", "the run's own user"), as_nobody=False)  # the test can fail
        _send(address, '{"kind": "lifecycle", "payload": {"event": "note", "payload": {"x": NaN}}}', as_nobody=False)
    finally:
        hold.unlink()
        assert run.wait(timeout=240) == 0
    events = (runs_root / "victim" / "events.jsonl").read_text()
    assert "injected by the run's own user" in events and "injected by nobody" not in events
    for line in events.splitlines():  # strict JSON, NaN included
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in events.jsonl"))
    assert '"x": null' in events


def test_killing_the_host_leaves_nothing_running_and_says_why(workdir, runs_root):
    run = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "500000",
            "--run-id",
            "orphan",
            "--extras",
            '{"fastlane": true}',
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started = json.loads(run.stdout.readline())
    segment = Path("/dev/shm") / "mosaic-fl-orphan"
    deadline = time.monotonic() + 60
    while not (runs_root / "orphan" / "runs").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the script is training
    from mosaic_core.procs import group_members, pids, read_stat

    training = [pid for pid in pids() if (stat := read_stat(pid)) and stat.ppid == run.pid and stat.live]
    assert len(training) == 1 and segment.exists() and started["event"] == "run_started"
    child_pids = group_members(training[0])
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in child_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in child_pids), "a training process outlived its host"
    assert not segment.exists()
    last = json.loads((runs_root / "orphan" / "events.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "run_failed" and "host process" in last["payload"]["error"]
    assert json.loads((runs_root / "orphan" / "manifest.json").read_text())["status"] == "failed"


def _alive(pid: int) -> bool:
    from mosaic_core.procs import process_alive

    return process_alive(pid)


def test_the_small_things_a_regression_would_slip_past(tmp_path):
    run_dir = RunDirectory(tmp_path, "r1")
    (tmp_path / "r1-x").mkdir()
    with pytest.raises(ConfigError, match="outside the run directory"):
        run_dir.inside("../r1-x/escape")  # a sibling sharing the prefix is outside
    with pytest.raises(ConfigError):
        check_run_id("run\n")  # the pattern must match the whole id
    emitter = EventEmitter("r1", tmp_path / "events.jsonl", stream=open(os.devnull, "w"))
    emitter.emit("run_completed", {})
    assert emitter.emit("note", {"text": "after the end"}) is None
    from cleanrl_worker.flags import extras_to_flags

    with pytest.raises(ConfigError, match="would be read as a flag"):
        extras_to_flags({"names": ["-h"]})


def test_the_training_process_context_carries_redacted_extras(tmp_path):
    from mosaic_core.config import build_config
    from mosaic_core.plugins import PluginHost
    from mosaic_core.runs import RunContext
    from mosaic_core.supervisor import Supervisor

    config = build_config(
        {
            "run_id": "r2",
            "algo": "ppo",
            "env_id": "CartPole-v1",
            "total_timesteps": 5,
            "extras": {"wandb_api_key": "sk-secret-value", "learning_rate": 0.1},
        }
    )
    run = RunContext(config, RunDirectory(tmp_path, "r2"), "cleanrl")
    env = Supervisor(run, PluginHost(trace=False), ["true"], {}).child_environment("mosaic/r2/x")
    context = json.loads(env["MOSAIC_CHILD"])
    assert context["extras"] == {"wandb_api_key": "***", "learning_rate": 0.1}
    assert "sk-secret-value" not in env["MOSAIC_CHILD"]
