"""Lifecycle events: one JSON object per line on stdout and in ``events.jsonl``.

``{"event", "run_id", "seq", "timestamp", "payload"}``; ``seq`` increases by one per event
of a run. Exactly one terminal event (see :data:`TERMINAL`) ends every run: the emitter
refuses a second one, and refuses anything after it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from mosaic_core.config import redact
from mosaic_core.files import read_private_text
from mosaic_core.jsontext import finite

TERMINAL = ("run_completed", "run_failed", "run_cancelled")
STATUS_OF = {"run_completed": "completed", "run_failed": "failed", "run_cancelled": "cancelled"}
EVENT_OF = {status: event for event, status in STATUS_OF.items()}


class EventEmitter:
    """Thread-safe writer of a run's lifecycle stream; payloads are redacted on the way."""

    def __init__(
        self,
        run_id: str,
        log_path: Path | None = None,
        stream: IO[str] | None = None,
        sinks: list[Callable[[dict[str, Any]], None]] | None = None,
        to_stream: bool = True,
    ):
        self.run_id = run_id
        self._stream = (sys.stdout if stream is None else stream) if to_stream else None
        self._log = open_append(log_path) if log_path else None
        self._lock = threading.Lock()
        self._seq = 0
        self.sinks = list(sinks or [])
        self.terminal: dict[str, Any] | None = None

    def emit(self, event: str, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Write one event; returns it, or None when the run already ended."""
        with self._lock:
            if self.terminal is not None:
                return None
            self._seq += 1
            record = {
                "event": event,
                "run_id": self.run_id,
                "seq": self._seq,
                "timestamp": time.time(),
                "payload": finite(redact(payload or {})),
            }
            line = json.dumps(record, default=str, allow_nan=False)
            if event in TERMINAL:
                self.terminal = record
            for out in (self._stream, self._log):
                if out is not None:
                    try:
                        out.write(line + "\n")
                        out.flush()
                    except (OSError, ValueError):  # a closed pipe must not lose the run's end
                        pass
        for sink in self.sinks:
            sink(record)
        return record

    def continue_after(self, path: Path) -> None:
        """Number on from the last ``seq`` in ``path`` (a resumed run's earlier attempts)."""
        seqs = [r.get("seq") for r in read_events(path)]
        self._seq = max([s for s in seqs if isinstance(s, int) and not isinstance(s, bool)], default=0)

    @property
    def status(self) -> str | None:
        return STATUS_OF[self.terminal["event"]] if self.terminal else None

    def close(self) -> None:
        if self._log:
            self._log.close()
            self._log = None


def open_append(path: Path) -> Any:
    """Open a run's event log for appending without following a symlink at its name."""
    fd = os.open(
        path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
    )  # less the run's umask
    return os.fdopen(fd, "a", encoding="utf-8")


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a run's ``events.jsonl``; a truncated last line is skipped."""
    events = []
    try:
        lines = read_private_text(path).splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events


def event_step(record: dict[str, Any]) -> int | None:
    """The env step a metric event reports (``metrics``, a heartbeat's nested ``metrics``), or None."""
    if record.get("event") not in ("metrics", "heartbeat"):
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    metrics = payload.get("metrics")
    if not isinstance(metrics, dict):
        metrics = payload
    step = metrics.get("global_step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def metric_steps(records: list[dict[str, Any]]) -> list[int]:
    """The steps of ``metrics`` events, in order (a heartbeat repeats the latest metrics: left out)."""
    return [
        step
        for record in records
        if record.get("event") == "metrics"
        for step in [event_step(record)]
        if step is not None
    ]


def one_history(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A resumed run's events as one history (docs/run-contract.md): an earlier attempt's metric
    events with a step above the ``from_step`` of a later ``run_resumed`` are dropped (the run
    went on from there; what it did past the checkpoint was lost with the stop)."""
    cutoff: float = float("inf")
    kept: list[dict[str, Any]] = []
    for record in reversed(records):
        if record.get("event") == "run_resumed":
            step = (record.get("payload") or {}).get("from_step")
            if isinstance(step, int) and not isinstance(step, bool):
                cutoff = min(cutoff, step)
            kept.append(record)
            continue
        step = event_step(record)
        if step is None or step <= cutoff:
            kept.append(record)
    kept.reverse()
    return kept
