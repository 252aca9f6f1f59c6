"""One seed of a trial: a normal supervised ``mosaic run`` subprocess, watched through its events.

The run gets its own run directory, FastLane, metrics and manifest like any other. Its JSONL
events on stdout feed the pruner: each ``metrics`` event gives an intermediate value. To
prune, the sweep writes the reason into the run directory (``RunDirectory.cancel_note``) and
sends SIGTERM to the ``mosaic run`` host's process group; the host cancels its training
process group and ends the run ``run_cancelled`` with that reason. The host is started in its
own session with a parent-death signal, so a sweep process killed with SIGKILL still takes its
runs down (no orphans).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import RunDirectory
from mosaic_core.procs import mosaic_command  # the seeds' and the sweep processes' command
from mosaic_core.toolkit import extras_for_child

GRACE_S = 5.0  # the run host's own SIGTERM→SIGKILL grace for its training process
RETURN_METRIC = "charts/episodic_return"


@dataclass
class SeedRun:
    """What to launch for one seed."""

    run_id: str
    worker: str
    algo: str
    env_id: str
    total_timesteps: int
    seed: int
    extras: dict[str, Any]
    runs_root: Path
    launcher_argv: list[str] = field(default_factory=list)  # where it executes (LauncherChoice.argv())


@dataclass
class SeedOutcome:
    status: str  # completed | failed | cancelled
    run_dir: Path
    error: str | None = None
    returncode: int | None = None
    reports: int = 0
    terminal: dict[str, Any] = field(default_factory=dict)


def command_for(run: SeedRun, dry_run: bool = False) -> list[str]:
    argv = [
        *mosaic_command(),
        "run",
        "--worker",
        run.worker,
        "--algo",
        run.algo,
        "--env-id",
        run.env_id,
        "--total-timesteps",
        str(run.total_timesteps),
        "--seed",
        str(run.seed),
        "--run-id",
        run.run_id,
        "--runs-dir",
        str(run.runs_root),
        "--extras",
        json.dumps(extras_for_child(run.extras)[0]),
        *run.launcher_argv,
    ]
    return argv + (["--dry-run", "--emit-summary"] if dry_run else ["--quiet", "--grace-period", str(GRACE_S)])


def environment(run: SeedRun) -> dict[str, str]:
    """The seed's environment: ours and its secret extras (``wandb_api_key``…), which reach its
    ``mosaic run`` as ``mosaic run`` takes them, never on its command line."""
    return {**os.environ, **extras_for_child(run.extras)[1]}


def _die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` started so that it gets SIGTERM when the sweep process dies, whatever kills it."""
    from mosaic_core.procs import with_parent_death_signal

    return with_parent_death_signal(argv)


def intermediate_value(payload: dict[str, Any], metric: str) -> float | None:
    """The value of ``metric`` in a ``metrics`` event payload (smoothed for the episodic return)."""
    if metric == RETURN_METRIC:
        value = payload.get("episodic_return_smoothed", payload.get("episodic_return"))
    else:
        scalars = payload.get("scalars") or {}
        losses = payload.get("losses") or {}
        value = scalars.get(metric, losses.get(metric.removeprefix("losses/")))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class SeedProcess:
    """A running seed; ``stop(reason)`` is safe from a signal handler or another thread."""

    def __init__(self, run: SeedRun):
        self.run = run
        self.directory = RunDirectory.for_run(run.runs_root, run.run_id)
        self.process: subprocess.Popen[str] | None = None
        self._stderr: deque[str] = deque(maxlen=20)
        self._stop_reason: str | None = None

    def start(self) -> SeedProcess:
        self.process = subprocess.Popen(
            _die_with_parent(command_for(self.run)),
            env=environment(self.run),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()
        return self

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip():
                self._stderr.append(line.rstrip())

    def stop(self, reason: str) -> None:
        """Write the reason where the run host finds it, then SIGTERM the host's group."""
        if self._stop_reason is not None or self.process is None:
            return
        self._stop_reason = reason
        try:
            self.directory.cancel_note.write_text(reason + "\n", encoding="utf-8")
        except OSError:
            pass  # the run directory is not there yet: the host was still starting
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def kill_after(self, seconds: float) -> None:
        """Last resort once a stop was asked: SIGKILL the host's group if it is still there."""
        if self.process is None:
            return
        deadline = time.monotonic() + seconds
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def follow(self, on_metrics: Callable[[dict[str, Any]], None]) -> SeedOutcome:
        """Read the event stream to its end; ``on_metrics`` gets each ``metrics`` payload."""
        assert self.process is not None and self.process.stdout is not None
        terminal: dict[str, Any] = {}
        reports = 0
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            name, payload = event.get("event"), event.get("payload") or {}
            if name == "metrics" and self._stop_reason is None:
                reports += 1
                on_metrics(payload)
            elif name in ("run_completed", "run_failed", "run_cancelled"):
                terminal = event
        code = self.process.wait()
        self._drain.join(timeout=5)
        if self._stop_reason is not None:
            self.kill_after(GRACE_S + 10)
        outcome = SeedOutcome("failed", self.directory.path, returncode=code, reports=reports, terminal=terminal)
        name = terminal.get("event")
        payload = terminal.get("payload") or {}
        if name == "run_completed":
            outcome.status = "completed"
        elif name == "run_cancelled" or self._stop_reason is not None:
            outcome.status, outcome.error = "cancelled", payload.get("reason") or self._stop_reason
        else:
            lines = list(self._stderr)
            outcome.error = payload.get("error") or (lines[-1] if lines else f"mosaic run exited with code {code}")
        return outcome
