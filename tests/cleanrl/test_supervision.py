"""Supervision through the real path: crashes, exits, signals, no orphans, one terminal event."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN

TERMINAL = {"run_completed", "run_failed", "run_cancelled"}

SLEEPER = """
import os, subprocess, sys, time
from dataclasses import dataclass
import tyro

@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 10
    seed: int = 1

tyro.cli(Args)
# a grandchild in the same process group, as an AsyncVectorEnv env process would be
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open("pids.txt", "w").write(f"{os.getpid()} {kid.pid}")
print("ready", flush=True)
time.sleep(300)
"""


def write(workdir: Path, name: str, text: str) -> str:
    (workdir / name).write_text(text)
    return name


def run_args(algo: str, run_id: str, *extra: str) -> list[str]:
    return [
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        algo,
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--run-id",
        run_id,
        *extra,
    ]


def terminal(events):
    ends = [e for e in events if e["event"] in TERMINAL]
    assert len(ends) == 1 and events[-1] is ends[0]
    return ends[0]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize(
    "body, code, message",
    [
        ("raise RuntimeError('exploded at import')", 1, "RuntimeError: exploded at import"),
        ("import sys; sys.exit(3)", 3, "exited with code 3"),
        ("pass", 0, None),
    ],
)
def test_script_outcomes(mosaic, workdir, runs_root, body, code, message):
    algo = write(workdir, "s.py", body + "\n")
    result = mosaic(*run_args(algo, "outcome"))
    assert result.returncode == code
    end = terminal(result.events)
    run_dir = runs_root / "outcome"
    if code == 0:
        assert end["event"] == "run_completed"
    else:
        assert end["event"] == "run_failed" and end["payload"]["returncode"] == code
        assert message in end["payload"]["error"] or message in end["payload"]["stderr_tail"]
        assert end["payload"]["logs"]["stderr"] == "logs/cleanrl.stderr.log"
    assert (run_dir / "logs/cleanrl.stderr.log").exists() and (run_dir / "config.json").exists()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == end["event"].removeprefix("run_")
    assert [json.loads(l) for l in (run_dir / "events.jsonl").read_text().splitlines()] == result.events


def start_host(workdir: Path, run_id: str, *extra: str) -> subprocess.Popen:
    algo = write(workdir, "sleeper.py", SLEEPER)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [str(BIN / "mosaic"), *run_args(algo, run_id, "--grace-period", "2", *extra)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_pids(run_dir: Path) -> tuple[int, int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = (run_dir / "pids.txt").read_text() if (run_dir / "pids.txt").exists() else ""
        if len(text.split()) == 2:
            a, b = text.split()
            return int(a), int(b)
        time.sleep(0.1)
    raise AssertionError("the training script never started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_host_cancels_the_whole_group(workdir, runs_root, sig):
    host = start_host(workdir, "cancel")
    child, grandchild = wait_for_pids(runs_root / "cancel")
    host.send_signal(sig)
    out, err = host.communicate(timeout=60)
    events = [json.loads(l) for l in out.splitlines()]
    end = terminal(events)
    assert end["event"] == "run_cancelled" and sig.name in end["payload"]["reason"]
    assert host.returncode == 130
    assert not alive(child) and not alive(grandchild)


def test_killed_training_process_is_a_failure(workdir, runs_root):
    host = start_host(workdir, "killed")
    child, grandchild = wait_for_pids(runs_root / "killed")
    os.kill(child, signal.SIGKILL)
    out, _ = host.communicate(timeout=60)
    end = terminal([json.loads(l) for l in out.splitlines()])
    assert end["event"] == "run_failed" and "SIGKILL" in end["payload"]["error"]
    assert not alive(grandchild)  # the orphaned grandchild was stopped too


def test_heartbeats_are_periodic(workdir, runs_root):
    host = start_host(workdir, "beats", "--heartbeat-interval", "0.3")
    wait_for_pids(runs_root / "beats")
    time.sleep(1.5)
    host.terminate()
    out, _ = host.communicate(timeout=60)
    beats = [json.loads(l) for l in out.splitlines() if '"heartbeat"' in l]
    assert len(beats) >= 3
    assert all(b["payload"]["pid"] for b in beats)


def test_a_completed_run_is_never_run_again_under_its_id(mosaic, workdir, runs_root):
    algo = write(workdir, "ok.py", "pass\n")
    assert mosaic(*run_args(algo, "twice")).returncode == 0
    before = (runs_root / "twice" / "events.jsonl").read_text()
    again = mosaic(*run_args(algo, "twice"))  # the same command again would resume it: a completed run is refused
    assert again.returncode == 2 and "run twice completed" in again.stderr and "--restart" in again.stderr
    assert again.stdout == ""
    assert (runs_root / "twice" / "events.jsonl").read_text() == before
