"""Following a run that a launcher started elsewhere (a node of a cluster, a scheduler's job) to
its one end: the caller's half of every launcher but the local one.

A launcher's ``execute(job)`` returns ``SomeCaller(job, ...).execute()``, a
:class:`RemoteCaller` subclass that says how its place starts, reports and stops a run
(:meth:`~RemoteCaller.start`, :meth:`~RemoteCaller.poll`, :meth:`~RemoteCaller.cancel_remote`,
:meth:`~RemoteCaller.give_up`). The base owns the rest, the same for every launcher:

- the stop signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1; one held since the run directory was made
  included: :func:`mosaic_core.hostsignals.handed_to`): the first asks the place, once, to
  cancel the run with that signal; a place that has not confirmed within the grace period (and
  :data:`CANCEL_EXTRA_S`) is given up on;
- the relay: each event the place reports goes into the run's events (``run.emit``: stdout, the
  run's ``events.jsonl``, the plugins), in order, one history (a resumed run numbers on). A
  place that writes the run's ``events.jsonl`` itself (a runs root every node shares:
  ``shares_run_dir``) has its lines shown here as they come instead;
- the one terminal event: the place's own, or, when it ended without one (it died, or was
  cancelled before it started), one recorded here, with the manifest the place did not write.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import hostsignals
from mosaic_core.events import EVENT_OF, STATUS_OF, TERMINAL, EventEmitter
from mosaic_core.launchers import Job
from mosaic_core.manifest import HOST_TERMINAL_FIELDS, record_run_end
from mosaic_core.runs import read_cancel_note
from mosaic_core.runstore.index import record_run

__all__ = ["CANCEL_EXTRA_S", "CODE_OF", "Ending", "EventLines", "Polled", "RemoteCaller", "stop_signals_to"]

stop_signals_to = hostsignals.handed_to  # for a launcher's own wait (a batch): the same hand-off

CANCEL_EXTRA_S = 20.0  # after the grace period: the place's host records the end, the place lets go
CODE_OF = {"completed": 0, "cancelled": 130, "failed": 1}
MANIFEST_LIMIT = 4 * 2**20  # the place's manifest.json, read back


@dataclass(frozen=True)
class Ending:
    """How the run ended: its status, the terminal event's payload and the exit code."""

    status: str
    payload: dict[str, Any]
    code: int


@dataclass
class Polled:
    """What one :meth:`RemoteCaller.poll` saw: the events the place reported since the last
    (none for a place that writes the run's log itself), and its exit code once it ended."""

    events: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None


class RemoteCaller:
    """The caller's side of one run a launcher runs elsewhere (subclass it; see the module)."""

    shares_run_dir = False  # True: the place writes the run's events.jsonl (the caller shows it)

    def __init__(self, job: Job):
        self.job, self.run = job, job.run
        self.cancel_reason: str | None = None  # set by the first stop signal
        self.cancel_signal: int = hostsignals.STOP_SIGNALS[0]
        self.terminal: dict[str, Any] | None = None  # the place's terminal event, once seen
        self.remote_started = False  # the place reported run_started
        self.hooks_started = False  # this host called the plugins' run_started (then run_finished follows)

    # ------------------------------------------------------------------ what a launcher provides
    def start(self) -> Ending | None:
        """Start the run at the place; an Ending when it ended before it started (cancelled)."""
        raise NotImplementedError

    def poll(self) -> Polled:
        """What happened since the last call (waits up to a short poll interval)."""
        raise NotImplementedError

    def cancel_remote(self, signum: int) -> None:
        """Ask the place to stop the run as ``signum`` stops a local one (its host records the end)."""
        raise NotImplementedError

    def give_up(self) -> Ending | None:
        """The place did not confirm the cancel in time: end it there; an Ending to stop
        following now (None: follow on until the place says it ended)."""
        return self.cancelled("the place did not confirm in time")

    def no_end(self, exit_code: int) -> Ending:
        """The place ended without the run's terminal event (it died, or was cancelled before
        the run started): how the run ended."""
        return Ending(
            "failed", {"error": f"the run ended (exit code {exit_code}) without its end event"}, exit_code or 1
        )

    def relay(self, record: dict[str, Any]) -> None:
        """One event of the place's (not the terminal one) into this run's events."""
        self.run.emit(record["event"], record.get("payload") or {})
        if record["event"] == "run_started" and not self.hooks_started:
            self.hooks_started = True
            self.job.host.run_started(self.run)

    def end_payload(self, record: dict[str, Any]) -> dict[str, Any]:
        """The place's terminal payload as this run's (paths on the node made ours)."""
        return dict(record.get("payload") or {})

    # ------------------------------------------------------------------ what the core does
    def execute(self) -> int:
        """Follow the run to its one terminal event; the exit code (130: cancelled)."""
        emitter = None if self.shares_run_dir else self._open_emitter()
        try:
            with hostsignals.handed_to(self._on_stop):
                try:
                    ending = self.follow()
                except Exception as exc:  # a broken place mid-run: the run still ends with one terminal event
                    ending = Ending("failed", {"error": f"{type(exc).__name__}: {exc}"}, 1)
                if not (self.shares_run_dir and self.terminal is not None):
                    self._record_end(ending)
        finally:
            if emitter is not None:
                emitter.close()
            record_run(self.run.run_dir)
        return ending.code

    def follow(self) -> Ending:
        """Start the run, relay what it reports, cancel it on a stop signal, until it ended."""
        log = EventLines(self.run.directory.events) if self.shares_run_dir else None  # from its end: this attempt's
        ending = self.start()
        if ending is not None:
            return ending
        deadline: float | None = None
        while True:
            if self.cancel_reason is not None and deadline is None:
                self.cancel_remote(self.cancel_signal)
                deadline = time.monotonic() + self.job.options.grace_period + CANCEL_EXTRA_S
            polled = self.poll()
            self._take(log, polled.events)
            if polled.exit_code is not None:
                self._take(log, [])  # the lines written as it ended
                return self._ending(polled.exit_code)
            if deadline is not None and time.monotonic() > deadline:
                deadline = math.inf
                ending = self.give_up()
                if ending is not None:
                    return ending

    def cancelled(self, detail: str | None = None) -> Ending:
        """The run cancelled from here: the signal's reason after the run's cancel note (a sweep's pruning)."""
        reason = f"{self.cancel_reason or 'cancelled'}{f', {detail}' if detail else ''}"
        note = read_cancel_note(self.run.directory)
        return Ending("cancelled", {"reason": f"{note} ({reason})" if note else reason}, CODE_OF["cancelled"])

    def _on_stop(self, signum: int) -> None:
        if self.cancel_reason is None:  # in a signal handler: only recorded, the loop acts on it
            self.cancel_reason = f"received {signal.Signals(signum).name}"
            self.cancel_signal = signum

    def _take(self, log: EventLines | None, events: list[dict[str, Any]]) -> None:
        """The place's new events: relayed into the run's (held back: its terminal one), or,
        from the log it writes itself, shown."""
        for record in events:
            self._seen(record)
            if record["event"] not in TERMINAL:
                self.relay(record)
            if record["event"] == "run_started":  # the runs root's index (a resume's row unsealed)
                record_run(self.run.run_dir)
        for line, record in log.new() if log is not None else []:
            self._seen(record)
            self._show(line, record)

    def _seen(self, record: dict[str, Any]) -> None:
        self.remote_started = self.remote_started or record["event"] == "run_started"
        if record["event"] in TERMINAL:
            self.terminal = record  # a requeued job's next attempt may follow it (then its own)

    def _ending(self, exit_code: int) -> Ending:
        if self.terminal is None:
            return self.no_end(exit_code)
        status = STATUS_OF[self.terminal["event"]]
        return Ending(
            status, self.end_payload(self.terminal), exit_code if not self.shares_run_dir else CODE_OF[status]
        )

    def _show(self, line: str | None, record: dict[str, Any]) -> None:
        """A line of the log the place writes, on this process's stdout as a local run prints it."""
        if self.job.options.json_stdout:
            print(line, flush=True)
        elif not self.run.quiet:
            payload = record.get("payload") or {}
            brief = ", ".join(f"{k}={v}" for k, v in payload.items() if isinstance(v, (int, float, str)))[:200]
            print(f"{record['event']}: {brief}", flush=True)

    def _open_emitter(self) -> EventEmitter:
        run, options = self.run, self.job.options
        sinks = [lambda record: self.job.host.on_event(run, record), *options.event_sinks]
        run.emitter = EventEmitter(
            run.run_id, run.directory.events, stream=options.stream, sinks=sinks, to_stream=options.json_stdout
        )
        if run.resume is not None:  # one log: this attempt's events number on from the earlier ones'
            run.emitter.continue_after(run.directory.events)
        return run.emitter

    def _record_end(self, ending: Ending) -> None:
        """The one terminal event, written here (with the manifest when the place wrote none)."""
        run, host, status = self.run, self.job.host, ending.status
        own = None
        if run.emitter is None or self.shares_run_dir:  # the place wrote the log so far: on from its last
            options = self.job.options
            own = run.emitter = EventEmitter(
                run.run_id, run.directory.events, stream=options.stream, to_stream=options.json_stdout
            )
            own.continue_after(run.directory.events)
        try:
            payload = ending.payload
            if not run.directory.manifest.exists():
                payload = record_run_end(run, host, status, payload, started=self.hooks_started)
            elif not self.shares_run_dir:  # the node's manifest came back: plugins' terminal fields made here
                if self.hooks_started:
                    host.run_finished(run, status)
                fields = host.terminal_payload(run, status, self._place_manifest(), HOST_TERMINAL_FIELDS)
                payload = {**payload, **fields}
            run.emit(EVENT_OF[status], payload)
        finally:
            if own is not None:
                own.close()
        if status == "failed" and not run.quiet and payload.get("error"):
            print(f"mosaic: error: run {run.run_id} failed: {payload['error']}", file=sys.stderr)

    def _place_manifest(self) -> dict[str, Any]:
        from mosaic_core.files import read_private_text

        try:
            document = json.loads(read_private_text(self.run.directory.manifest, MANIFEST_LIMIT))
        except (OSError, ValueError):
            return {}
        return document if isinstance(document, dict) else {}


class EventLines:
    """Complete lines appended to a run's ``events.jsonl`` since it was made or last called (a
    file the place writes; opened without following links, read in bounded pieces)."""

    def __init__(self, path: Path):
        self.path, self.partial = path, b""
        try:  # lines already there (a resumed run's earlier attempts) are not new
            self.offset = os.lstat(path).st_size
        except OSError:
            self.offset = 0

    def new(self) -> list[tuple[str, dict[str, Any]]]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(4 * 1024 * 1024)
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        out = []
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").strip()
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("event"), str):
                out.append((line, record))
        return out
