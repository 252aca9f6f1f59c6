"""Supervise one training process: lifecycle events, heartbeats, signals, logs, manifest.

Any worker uses it: give it the command to run and a :class:`RunContext`. The child runs in
its own process group with cwd = the run directory and stdout/stderr in ``logs/``. Every run
ends with exactly one terminal event, also when the child is killed or the host receives
SIGTERM/SIGINT (the child's whole group then gets SIGTERM, and SIGKILL after a grace period:
no orphan processes; a host never outlives its training process by more than the grace
period). Whoever signals a run may first write one line saying why into
``RunDirectory.cancel_note`` (``cancel_reason.txt``, e.g. a sweep's pruning decision):
``run_cancelled``'s ``reason`` then starts with it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import channel, hostsignals, procs
from mosaic_core.childenv import CHILD_VAR, FAILURE_KIND, GRACE_VAR, LIFECYCLE_KIND, REFUSAL_KIND, describe_child
from mosaic_core.config import redact
from mosaic_core.events import EVENT_OF, TERMINAL, EventEmitter
from mosaic_core.failures import failure_reason
from mosaic_core.files import tail_lines
from mosaic_core.manifest import record_run_end
from mosaic_core.plugins import PluginHost, plugin_records
from mosaic_core.runs import RunContext, read_cancel_note
from mosaic_core.runstore.index import record_run
from mosaic_core.types import ChildContext

BOOT_DIR = Path(__file__).parent / "_boot"
STDERR_TAIL_LINES = 40
KILL_WAIT_S = 1.0  # after SIGKILL, for the group's processes to be gone
REFUSED_EXIT = 2  # with a config_refused message first: the run's config was refused (mosaic_core.child.refuse_config)
# SDL (pygame, used by gymnasium's renderers) installs SIGINT/SIGTERM handlers that turn a
# stop request into a quit event nobody reads: a rendering run would ignore cancel.
CHILD_DEFAULTS = {"SDL_NO_SIGNAL_HANDLERS": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class SupervisorOptions:
    heartbeat_interval: float = 30.0
    grace_period: float = 10.0
    stream: Any = None  # where JSONL goes; stdout by default
    heartbeat_extra: Callable[[], dict[str, Any]] | None = None  # e.g. a gRPC heartbeat
    event_sinks: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)  # e.g. a daemon told of each
    started_payload: dict[str, Any] = field(default_factory=dict)
    # Interactive runs: the child talks to the user over the host's stdin/stdout, so the
    # lifecycle stream goes to events.jsonl only.
    passthrough_stdio: bool = False
    json_stdout: bool = True  # False: a person watches; plugins render the events (events.jsonl keeps them)
    num_envs: int | None = None  # told to training-process hooks (ChildContext.num_envs)


class Supervisor:
    """Runs ``argv`` for ``run`` and returns the exit code a CLI should use."""

    def __init__(
        self,
        run: RunContext,
        host: PluginHost,
        argv: list[str],
        env: dict[str, str],
        options: SupervisorOptions | None = None,
        cwd: Path | None = None,
    ):
        self.run, self.host, self.argv = run, host, argv
        self.env_additions = env
        self.cwd = cwd or run.run_dir
        self.options = options or SupervisorOptions()
        self.process: subprocess.Popen[bytes] | None = None
        self._cancel_reason: str | None = None
        self._refusal: str | None = None  # the training process refused its config (REFUSAL_KIND)
        # Wake-ups go through a pipe, not a threading.Event: a signal handler runs in the main
        # thread, possibly while it holds the Event's lock inside wait(); os.write takes no lock.
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._child_events = host.child_events() | run.worker_events
        self._undeclared: set[str] = set()
        self._waiter: threading.Thread | None = None

    # ------------------------------------------------------------------ events
    def _on_child_message(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == LIFECYCLE_KIND:
            event = payload.get("event")
            if isinstance(event, str) and event in self._child_events and event not in TERMINAL:
                self.run.emit(event, self._absolute_paths(payload.get("payload") or {}))
            elif isinstance(event, str) and event not in self._undeclared:
                self._undeclared.add(event)  # dropped, never silently: once per run and event
                why = (
                    "terminal events are the host's"
                    if event in TERMINAL
                    else "neither the host, a plugin "
                    "(mosaic_child_events) nor the worker (Worker.child_events) declared it"
                )
                print(
                    f"mosaic: warning: worker {self.run.worker!r} emitted child event {event[:80]!r}: {why}; "
                    "it is dropped",
                    file=sys.stderr,
                )
            return
        if kind == REFUSAL_KIND:  # mosaic_core.child.refuse_config: a config error, said in one line
            if isinstance(payload.get("error"), str) and payload["error"]:
                self._refusal = payload["error"][:1000]
            return
        if kind == FAILURE_KIND:  # a plugin failed in the training process
            if all(isinstance(payload.get(k), str) for k in ("plugin", "hook", "error")):
                self.host.record_failure(payload["plugin"], payload["hook"], payload["error"], "training process")
            return
        self.host.on_child_message(self.run, kind, payload)

    def _absolute_paths(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A child's relative ``path`` is relative to its cwd (the run directory): make it
        absolute, so any path a run prints can be pasted back from anywhere."""
        path = payload.get("path")
        if isinstance(path, str) and path and not os.path.isabs(path):
            payload = {**payload, "path": os.path.normpath(os.path.join(self.cwd, path))}
        return payload

    def _sink(self, record: dict[str, Any]) -> None:
        self.host.on_event(self.run, record)

    # ------------------------------------------------------------------ child
    def child_environment(self, address: str) -> dict[str, str]:
        cfg = self.run.config
        # Secrets reach the child only through the env plugins give it, never a second copy here.
        child = ChildContext(
            run_id=cfg.run_id,
            run_dir=self.run.run_dir,
            extras=redact(cfg.extras),
            channel=channel.ChannelSender(address),
            algo=cfg.algo,
            env_id=cfg.env_id,
            num_envs=self.options.num_envs,
            worker=self.run.worker,
            plugins=plugin_records(self.host, self.run.worker),
            host_pid=os.getpid(),
        )
        env = dict(os.environ)
        for name, value in CHILD_DEFAULTS.items():
            env.setdefault(name, value)
        env.update(self.env_additions)
        env[CHILD_VAR] = describe_child(child)
        env[GRACE_VAR] = str(self.options.grace_period)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if p)
        # The run directory is the training process's cwd: keep it (and any script's folder) off
        # sys.path, so nothing in it can shadow a module (`python -m pkg.mod` would put it first).
        env["PYTHONSAFEPATH"] = "1"
        return env

    def _start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        directory = self.run.directory
        worker = self.run.worker
        out = _open_log(directory.log(worker, "stdout"))
        err = _open_log(directory.log(worker, "stderr"))
        passthrough = self.options.passthrough_stdio
        try:
            # The training process dies with its host even if the host is SIGKILLed (a Python
            # training process trades this for a watchdog that also records why: _patchpoints.install).
            return subprocess.Popen(
                procs.with_parent_death_signal(self.argv),
                cwd=self.cwd,
                env=env,
                stdin=None if passthrough else subprocess.DEVNULL,
                stdout=None if passthrough else out,
                stderr=err,
                start_new_session=True,
            )
        finally:
            out.close()
            err.close()

    def stop_group(self, grace: float | None = None) -> None:
        """SIGTERM the child's process group, then SIGKILL what is left after the grace period."""
        if self.process is not None:
            procs.stop_group(
                self.process.pid,
                self.options.grace_period if grace is None else grace,
                self.process,
                kill_wait=KILL_WAIT_S,
            )

    def cancel(self, reason: str) -> None:
        """Ask the run to stop (thread-safe and lock-free: used by signal handlers)."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self._wake_up()

    def _wake_up(self) -> None:
        try:
            os.write(self._wake_w, b"!")
        except (BlockingIOError, OSError):  # already woken (pipe full) or closed at the end
            pass

    def _sleep(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for a wake-up, then drain the pipe."""
        select.select([self._wake_r], [], [], timeout)
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    # ------------------------------------------------------------------ main loop
    def execute(self) -> int:
        run = self.run
        run.directory.create()
        emitter = EventEmitter(
            run.run_id,
            run.directory.events,
            stream=self.options.stream,
            sinks=[self._sink, *self.options.event_sinks],
            to_stream=self.options.json_stdout and not self.options.passthrough_stdio,
        )
        run.emitter = emitter
        if run.resume is not None:  # one log: this attempt's events number on from the earlier ones'
            emitter.continue_after(run.directory.events)
        receiver = channel.ChannelReceiver(channel.new_address(run.run_id), self._on_child_message)
        signals = contextlib.ExitStack()  # cancel() takes no lock (a pipe write): safe in a handler
        signals.enter_context(hostsignals.handed_to(lambda signum: self.cancel(hostsignals.reason(signum))))
        started_hooks = False
        terminal_payload: dict[str, Any] = {}
        status, exit_code = "failed", 1
        try:
            env = self.child_environment(receiver.address)
            receiver.start()
            if run.resume is not None:  # the same run goes on: its earlier events stay, this attempt follows
                run.emit("run_resumed", run.resume.payload())
            run.emit(
                "run_started",
                {
                    "worker": run.worker,
                    "algo": run.config.algo,
                    "env_id": run.config.env_id,
                    "total_timesteps": run.config.total_timesteps,
                    "run_dir": str(run.run_dir),
                    **self.options.started_payload,
                },
            )
            started_hooks = True
            record_run(run.run_dir)  # the runs root's index (mosaic_core.runstore.index)
            self.host.run_started(run)
            if self._cancel_reason is None:
                self.process = self._start(env)
                run.pid = self.process.pid
                self._supervise()
            status, terminal_payload, exit_code = self._outcome()
        except Exception as exc:
            status, exit_code = "failed", 1
            terminal_payload = {"error": f"{type(exc).__name__}: {exc}"}
            if self.process is not None and self.process.poll() is None:
                self.stop_group()
        finally:
            receiver.close()
            self._finish(status, terminal_payload, started_hooks)
            emitter.close()
            record_run(run.run_dir)
            # Only once the run's end is on record: until then a signal can only cancel it. (A daemon
            # killed with -9 sends its runs one parent-death SIGTERM per thread of it that exits,
            # spread over milliseconds under load; one after a restore killed a run's host silently.)
            signals.close()
            self._close_wake_pipe()
            # The host exits next: the interpreter's last collection of its objects took 2-3 s on a
            # busy 2-core machine (the host outlived its run by that much); frozen, they are left to the exit.
            gc.freeze()
        return exit_code

    def _close_wake_pipe(self) -> None:
        if self._waiter is not None:
            self._waiter.join(timeout=5)  # its last write must not land in a reused descriptor
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def _supervise(self) -> None:
        proc = self.process
        assert proc is not None

        # Wake the loop the moment the child exits (not at the next poll).
        def wait_then_wake() -> None:
            proc.wait()
            self._wake_up()

        self._waiter = threading.Thread(target=wait_then_wake, name="mosaic-child-wait", daemon=True)
        self._waiter.start()
        started = time.monotonic()
        next_beat = started + self.options.heartbeat_interval
        while True:
            if proc.poll() is not None:
                break
            if self._cancel_reason is not None:
                self.stop_group()
                return
            now = time.monotonic()
            if now >= next_beat:
                self._heartbeat(now - started)
                next_beat = now + self.options.heartbeat_interval
            self._sleep(min(1.0, max(0.0, next_beat - now)))  # a wake-up during the checks stays in the pipe
        # The child is gone; make sure nothing of its group survives it, within the grace period.
        if procs.group_alive(proc.pid):
            self.stop_group(max(0.0, self.options.grace_period - KILL_WAIT_S))

    def _heartbeat(self, elapsed: float) -> None:
        payload: dict[str, Any] = {"elapsed_s": round(elapsed, 3), "pid": self.run.pid}
        payload.update(self.host.heartbeat_fields(self.run, reserved={"elapsed_s", "pid", "grpc_heartbeat"}))
        if self.options.heartbeat_extra:
            try:
                payload.update(self.options.heartbeat_extra() or {})
            except Exception as exc:  # e.g. the daemon went away: say so, keep supervising
                payload["heartbeat_error"] = f"{type(exc).__name__}: {exc}"
        self.run.emit("heartbeat", payload)

    def _outcome(self) -> tuple[str, dict[str, Any], int]:
        logs = {
            "stdout": self.run.directory.relative(self.run.directory.log(self.run.worker, "stdout")),
            "stderr": self.run.directory.relative(self.run.directory.log(self.run.worker, "stderr")),
        }
        code = self.process.returncode if self.process is not None else None
        if self._cancel_reason is not None:
            note = read_cancel_note(self.run.directory)  # e.g. "pruned by the sweep at step 4096"
            reason = f"{note} ({self._cancel_reason})" if note else self._cancel_reason
            resumable = self._resumable()
            if code == 0 or resumable.get("whole_budget"):  # the stop came after its last step
                stopped = f"{reason}, after its last step: the run did its whole budget"
                return "completed", {"returncode": code, "logs": logs, "stopped": stopped}, 0
            return "cancelled", {"reason": reason, "returncode": code, "logs": logs, **resumable}, 130
        if code == 0:
            return "completed", {"returncode": 0, "logs": logs}, 0
        if code == REFUSED_EXIT and self._refusal:
            return "failed", {"error": self._refusal, "error_kind": "config", "returncode": code, "logs": logs}, code
        tail = "\n".join(tail_lines(self.run.directory.log(self.run.worker, "stderr"), STDERR_TAIL_LINES))
        if code is not None and code < 0:
            error = f"training process killed by signal {signal.Signals(-code).name}"
        else:
            error = failure_reason(tail.splitlines()) or f"training process exited with code {code}"
        exit_code = code if code and code > 0 else 1
        return "failed", {"error": error, "returncode": code, "stderr_tail": tail, "logs": logs}, exit_code

    def _resumable(self) -> dict[str, Any]:
        """Whether ``mosaic resume`` can continue the run: its newest checkpoint (the worker's
        layout), or why not (``not_resumable``, one line). ``whole_budget``: that checkpoint is at
        the run's ``total_timesteps`` or past it (nothing is left to resume: the run completed)."""
        layout = self.run.checkpoint_layout
        if layout is None:
            why = f"worker {self.run.worker!r} keeps no checkpoints of algo {self.run.config.algo!r} to resume from"
            return {"resumable": False, "not_resumable": why}
        from mosaic_core.contract import newest_checkpoint

        found = newest_checkpoint(self.run.run_dir, layout, self.run.run_id)
        if found is None:
            why = "no checkpoint was saved: the stop came before the run had one to keep"
            return {"resumable": False, "not_resumable": why}
        total = self.run.config.total_timesteps
        if isinstance(total, int) and total > 0 and found.step >= total:
            return {"whole_budget": True}
        return {"resumable": True, "from_step": found.step, "checkpoint": str(found.path)}

    def _finish(self, status: str, payload: dict[str, Any], started_hooks: bool) -> None:
        run = self.run
        payload = record_run_end(run, self.host, status, payload, started=started_hooks)
        run.emit(EVENT_OF[status], payload)
        if status == "failed" and payload.get("error_kind") == "config":  # --quiet too: the one line of why
            print(
                f"mosaic: error: {payload['error']} (run {run.run_id} refused it before its first step)",
                file=sys.stderr,
            )
        elif status == "failed" and payload.get("error"):
            print(f"mosaic: error: run {run.run_id} failed: {payload['error']}", file=sys.stderr)


def _open_log(path: Path) -> Any:
    """A run's log, appended to without following a symlink at its name."""
    fd = os.open(
        path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
    )  # less the run's umask
    return os.fdopen(fd, "ab")
