"""Daemon fixtures: a real daemon on a free loopback port, in this process or in its own.

The fixtures put the daemon's client token in ``$MOSAIC_TOKEN`` (the newest daemon's), which
the client functions and the CLI send when given no token of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mosaic_core.trainer import client
from mosaic_core.trainer.auth import TOKEN_ENV
from mosaic_core.trainer.daemon import DaemonOptions, TrainerDaemon

from .fake_worker import command as fake_command

HERE = Path(__file__).parent
CONFIG = {"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 100}


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll until ``predicate()`` is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def record(target: str, run_id: str, token: str | None = None):
    return next((r for r in client.list_runs(target, token=token) if r.run_id == run_id), None)


def wait_final(target: str, run_id: str, timeout: float = 60.0, token: str | None = None):
    from mosaic_core.trainer.protocol import FINAL_STATUSES

    return wait_for(
        lambda: (r := record(target, run_id, token)) is not None and r.status in FINAL_STATUSES and r,
        timeout,
        f"run {run_id} to end",
    )


def fake_config(fake: dict | None = None, extras: dict | None = None, **fields: Any) -> str:
    """A worker config JSON (one the CleanRL worker accepts: the daemon validates it as a dry
    run would) whose ``worker_id``, ``fake:<JSON>``, drives the fake worker."""
    return json.dumps({**CONFIG, **fields, "worker_id": "fake:" + json.dumps(fake or {}), "extras": extras or {}})


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def start_daemon(state_dir: Path, monkeypatch):
    """``start_daemon(**DaemonOptions overrides)`` → a started TrainerDaemon (fake worker runs)."""
    daemons: list[TrainerDaemon] = []

    def start(**overrides: Any) -> TrainerDaemon:
        options = {
            "state_dir": state_dir,
            "listen": "127.0.0.1:0",
            "gpus": 0,
            "grace_period": 1.0,
            "heartbeat_timeout": 30.0,
            "worker_command": fake_command,
            "max_concurrent": 4,
            **overrides,
        }
        daemon = TrainerDaemon(DaemonOptions(**options))
        daemon.start()
        daemons.append(daemon)
        if daemon.token:
            monkeypatch.setenv(TOKEN_ENV, daemon.token)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()


@pytest.fixture
def daemon(start_daemon) -> TrainerDaemon:
    return start_daemon()


class DaemonProcess:
    """A daemon in its own process (``daemon_main.py``, fake worker runs, or ``mosaic daemon``)."""

    def __init__(self, argv: list[str], cwd: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("MOSAIC_CHILD", None)
        self.stderr = tempfile.TemporaryFile("w+")  # a file, not a pipe: the daemon never blocks on it
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.stderr.seek(0)
            raise AssertionError(f"daemon did not start: {self.stderr.read()}")
        ready = json.loads(line)
        self.target, self.pid = ready["listen_address"], ready["pid"]
        self.state_dir = Path(ready["state_dir"]) if ready.get("state_dir") else None
        token_file = ready.get("token_file")
        self.token = Path(token_file).read_text().strip() if token_file else None

    def log(self) -> str:
        """What the daemon wrote on stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        finally:
            self.proc.stdout.close()
            self.stderr.close()


def completed_daemon_run(
    tmp_path: Path, config: dict, timeout: float = 400.0, daemon_argv: list[str] | None = None
) -> tuple[Any, list[dict], str]:
    """Submit ``config`` to a `mosaic daemon` of its own (state under ``tmp_path``; ``daemon_argv``: the
    command of another daemon program, given ``--state-dir``) over gRPC and wait for the run: it must
    complete, registered with the MOSAIC/1.0 handshake, and the daemon's log must name its start.
    Returns (the final record, the run's events, the daemon's log)."""
    from mosaic_core.trainer import trainer_pb2 as pb

    argv = daemon_argv or [str(Path(sys.executable).with_name("mosaic")), "daemon", "--listen", "127.0.0.1:0"]
    daemon = DaemonProcess([*argv, "--state-dir", str(tmp_path / "state")], tmp_path)
    try:
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=timeout, token=daemon.token)
        assert (final.status, final.terminal_event, final.exit_code) == (pb.RUN_STATUS_TERM, "run_completed", 0), (
            final.failure_reason
        )
        events = [json.loads(line) for line in Path(final.run_dir, "events.jsonl").read_text().splitlines() if line]
        assert events[0]["payload"]["grpc"]["accepted_version"] == "MOSAIC/1.0"
        log = daemon.log()
        assert f"run {run_id}: started ({config['worker']}, pid " in log
        return final, events, log
    finally:
        daemon.stop()


@pytest.fixture
def daemon_process(tmp_path: Path, monkeypatch):
    """``daemon_process(*args, mosaic=False)`` starts a daemon process; stopped after the test."""
    started: list[DaemonProcess] = []

    def start(*args: str, mosaic: bool = False) -> DaemonProcess:
        if mosaic:
            argv = [str(Path(sys.executable).with_name("mosaic")), "daemon", "--listen", "127.0.0.1:0", *args]
        else:
            argv = [sys.executable, str(HERE / "daemon_main.py"), *args]
        process = DaemonProcess(argv, tmp_path)
        started.append(process)
        if process.token:
            monkeypatch.setenv(TOKEN_ENV, process.token)
        return process

    yield start
    for process in started:
        process.stop()
