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
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from mosaic_core.config import redact
from mosaic_core.files import open_private
from mosaic_core.jsontext import finite

TERMINAL = ("run_completed", "run_failed", "run_cancelled")
STATUS_OF = {"run_completed": "completed", "run_failed": "failed", "run_cancelled": "cancelled"}
EVENT_OF = {status: event for event, status in STATUS_OF.items()}
MAX_LINE_BYTES = 1024 * 1024  # an event line longer than this is skipped (the host writes far shorter ones)
READ_BYTES = 1024 * 1024  # what the streaming readers read at a time


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
        """Number on from the last ``seq`` in ``path`` (a resumed run's earlier attempts; read from its end)."""
        seqs = (r.get("seq") for r in events_backwards(path))
        self._seq = next((s for s in seqs if isinstance(s, int) and not isinstance(s, bool)), 0)

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
    """Every event of a run's ``events.jsonl`` as a list (a small log's; what replays a run's
    history streams it instead: :func:`iter_events`, :func:`events_backwards`)."""
    return list(iter_events(path))


def iter_events(path: Path, names: Collection[str] | None = None) -> Iterator[dict[str, Any]]:
    """The events of a run's ``events.jsonl`` in order, read as a stream in bounded memory: a
    malformed or truncated line is skipped, one over :data:`MAX_LINE_BYTES` dropped as it is
    read. ``names``: only those events (lines naming none of them are not parsed). Nothing when
    the file is missing; a link, FIFO or another user's file raises UntrustedPath (never waited on)."""
    try:
        handle = open_private(path)
    except FileNotFoundError:
        return
    with handle:
        for block in _blocks(handle):
            yield from _parsed(block.split(b"\n"), names)


def events_backwards(path: Path, names: Collection[str] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`iter_events` from the last event to the first, read from the end of the file: what
    asks for the last of something (the terminal event, the newest ``seq``) reads only the tail."""
    try:
        handle = open_private(path)
    except FileNotFoundError:
        return
    with handle:
        end = os.fstat(handle.fileno()).st_size
        carry: bytes | None = b""  # the end of the line the previous block began inside (None: over-long, dropped)
        while end > 0:
            start = max(0, end - READ_BYTES)
            handle.seek(start)
            block = handle.read(end - start)
            end = start
            first = block.find(b"\n") if start else -1  # at the file's start, the whole block is lines
            if start and first < 0:  # the block lies inside one line
                carry = None if carry is None or len(block) + len(carry) > MAX_LINE_BYTES else block + carry
                continue
            if carry is None:  # the over-long line began after the block's last newline: leave it out
                last = block.rfind(b"\n")
                body = block[first + 1 : last] if last > first else b""
            else:
                body = block[first + 1 :] + carry
            carry = block[:first] if start else b""
            yield from _parsed(reversed(body.split(b"\n")), names)


def _blocks(handle: IO[bytes]) -> Iterator[bytes]:
    """``handle``'s bytes in blocks of whole lines (the last may lack its newline); a line over
    :data:`MAX_LINE_BYTES` is left out as it is read, never held whole."""
    partial, dropping = b"", False
    while chunk := handle.read(READ_BYTES):
        if dropping:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            chunk, dropping = chunk[newline + 1 :], False
        data = partial + chunk
        cut = data.rfind(b"\n") + 1
        partial = data[cut:]
        if len(partial) > MAX_LINE_BYTES:
            partial, dropping = b"", True
        if cut:
            yield data[:cut]
    if partial:
        yield partial


def _parsed(lines: Iterable[bytes], names: Collection[str] | None) -> Iterator[dict[str, Any]]:
    needles = tuple(f'"{name}"'.encode() for name in names) if names is not None else ()
    for line in lines:
        if not line.strip() or len(line) > MAX_LINE_BYTES:
            continue
        if names is not None and not any(needle in line for needle in needles):
            continue  # cheaper than parsing it: the name is in every line that is such an event
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            if names is None or record["event"] in names:
                yield record


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
