"""Fixtures of the analytics tests: real runs of a tiny CleanRL-style script through `mosaic run`.

The completed, failed and cancelled runs are made once per session and shared (read-only) by
the manifest, `runs`, `plot` and `tensorboard` tests, to keep the folder fast.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BIN, Result, run_cli

SCRIPT = Path(__file__).with_name("tiny_cleanrl.py")
TERMINAL = ("run_completed", "run_failed", "run_cancelled")


def run_args(run_id: str, total: int = 1000, extras: dict | None = None, *more: str) -> list[str]:
    args = [
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        str(SCRIPT),
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        str(total),
        "--run-id",
        run_id,
    ]
    if extras:
        args += ["--extras", json.dumps(extras)]
    return [*args, *more]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without anything W&B could pick up, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.pop("MOSAIC_CHILD", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def start(args: list[str], cwd: Path, env: dict[str, str] | None = None, stderr=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "mosaic"), *args], cwd=cwd, env=env or clean_env(), stdout=subprocess.PIPE, stderr=stderr, text=True
    )


def read_events_until(proc: subprocess.Popen, wanted) -> list[dict]:
    """Read JSONL events from ``proc`` until ``wanted(event)`` is true (or the stream ends)."""
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if wanted(events[-1]):
            break
    return events


@dataclass
class TtyResult:
    returncode: int
    stdout: str
    terminal: str

    @property
    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run_with_tty_stderr(args: list[str], cwd: Path, timeout: float = 120) -> TtyResult:
    """Run ``mosaic`` with stderr on a pseudo-terminal (as at a shell) and stdout on a pipe."""
    master, slave = pty.openpty()
    env = clean_env(TERM="xterm-256color", COLUMNS="160")
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    chunks = []
    while True:  # drain the terminal while the run goes on, so it never blocks on a full pty
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    stdout = proc.stdout.read()
    proc.wait(timeout=timeout)
    os.close(master)
    return TtyResult(proc.returncode, stdout, b"".join(chunks).decode("utf-8", "replace"))


@dataclass
class FinishedRuns:
    root: Path
    workdir: Path
    completed: Result
    failed: Result
    cancelled: list[dict]


@pytest.fixture(scope="session")
def finished_runs(tmp_path_factory) -> FinishedRuns:
    """One completed (with a checkpoint and notes), one failed and one cancelled run."""
    workdir = tmp_path_factory.mktemp("analytics-runs")
    root = workdir / "var" / "trainer" / "runs"
    completed = run_cli(
        run_args("done", 1500, {"save_model": True, "notes": "baseline run"}), cwd=workdir, env=clean_env()
    )
    assert completed.returncode == 0, completed.stderr
    failed = run_cli(run_args("broken", 1500, {"crash_at": 600}), cwd=workdir, env=clean_env())
    assert failed.returncode != 0
    proc = start(run_args("stopped", 100_000, {"step_delay": 0.002}), workdir)
    events = read_events_until(proc, lambda e: e["event"] == "metrics")
    proc.send_signal(signal.SIGINT)
    events += [json.loads(line) for line in proc.stdout]
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == 130, events[-1]
    return FinishedRuns(root, workdir, completed, failed, events)
