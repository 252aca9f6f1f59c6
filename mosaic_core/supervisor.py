"""Supervise one training process: lifecycle events, heartbeats, signals, logs, manifest.

Any worker uses it: give it the command to run and a :class:`RunContext`. The child runs in
its own process group with cwd = the run directory and stdout/stderr in ``logs/``. Every run
ends with exactly one terminal event, also when the child is killed or the host receives
SIGTERM/SIGINT (the child's whole group then gets SIGTERM, and SIGKILL after a grace period:
no orphan processes). Whoever signals a run may first write one line saying why into
``RunDirectory.cancel_note`` (``cancel_reason.txt``, e.g. a sweep's pruning decision):
``run_cancelled``'s ``reason`` then starts with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mosaic_core import channel
from mosaic_core.child import ENV_VAR as CHILD_VAR
from mosaic_core.child import LIFECYCLE_KIND, ChildContext
from mosaic_core.config import redact
from mosaic_core.events import EVENT_OF, TERMINAL, EventEmitter
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import RunContext, read_cancel_note, write_json_atomic

BOOT_DIR = Path(__file__).parent / "_boot"
MANIFEST_SCHEMA = "mosaic.analytics/1"
CHILD_EVENTS = frozenset({"checkpoint_saved", "curriculum_stage", "eval_batch", "note"})
STDERR_TAIL_LINES = 40


@dataclass
class SupervisorOptions:
    heartbeat_interval: float = 30.0
    grace_period: float = 10.0
    stream: Any = None  # where JSONL goes; stdout by default
    heartbeat_extra: Callable[[], dict[str, Any]] | None = None  # e.g. a gRPC heartbeat
    started_payload: dict[str, Any] = field(default_factory=dict)
    # Interactive runs: the child talks to the user over the host's stdin/stdout, so the
    # lifecycle stream goes to events.jsonl only.
    passthrough_stdio: bool = False
    num_envs: int | None = None  # told to training-process hooks (ChildContext.num_envs)


class Supervisor:
    """Runs ``argv`` for ``run`` and returns the exit code a CLI should use."""

    def __init__(self, run: RunContext, host: PluginHost, argv: list[str], env: dict[str, str],
                 options: SupervisorOptions | None = None):
        self.run, self.host, self.argv = run, host, argv
        self.env_additions = env
        self.options = options or SupervisorOptions()
        self.process: subprocess.Popen[bytes] | None = None
        self._cancel_reason: str | None = None
        self._wake = threading.Event()

    # ------------------------------------------------------------------ events
    def _on_child_message(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == LIFECYCLE_KIND:
            event = payload.get("event")
            if isinstance(event, str) and event in CHILD_EVENTS and event not in TERMINAL:
                self.run.emit(event, payload.get("payload") or {})
            return
        try:
            self.host.on_child_message(self.run, kind, payload)
        except Exception as exc:  # a plugin bug must not kill supervision
            print(f"mosaic: {exc}", file=sys.stderr)

    def _sink(self, record: dict[str, Any]) -> None:
        try:
            self.host.on_event(self.run, record)
        except Exception as exc:
            print(f"mosaic: {exc}", file=sys.stderr)

    # ------------------------------------------------------------------ child
    def child_environment(self, address: str) -> dict[str, str]:
        cfg = self.run.config
        # Secrets reach the child only through the env plugins give it, never a second copy here.
        child = ChildContext(run_id=cfg.run_id, run_dir=self.run.run_dir, extras=redact(cfg.extras),
                             channel=channel.ChannelSender(address), algo=cfg.algo, env_id=cfg.env_id,
                             num_envs=self.options.num_envs)
        env = dict(os.environ)
        env.update(self.env_additions)
        env[CHILD_VAR] = child.describe()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT_DIR), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def _start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        directory = self.run.directory
        worker = self.run.worker
        out = open(directory.log(worker, "stdout"), "ab")
        err = open(directory.log(worker, "stderr"), "ab")
        passthrough = self.options.passthrough_stdio
        try:
            return subprocess.Popen(self.argv, cwd=self.run.run_dir, env=env,
                                    stdin=None if passthrough else subprocess.DEVNULL,
                                    stdout=None if passthrough else out, stderr=err, start_new_session=True)
        finally:
            out.close()
            err.close()

    def stop_group(self) -> None:
        """SIGTERM the child's process group, then SIGKILL what is left after the grace period."""
        proc = self.process
        if proc is None:
            return
        pgid = proc.pid
        for sig, wait in ((signal.SIGTERM, self.options.grace_period), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if proc.poll() is not None and not group_alive(pgid):
                    return
                time.sleep(0.05)
        proc.wait()

    def cancel(self, reason: str) -> None:
        """Ask the run to stop (thread-safe; used by signal handlers and the daemon)."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self._wake.set()

    # ------------------------------------------------------------------ main loop
    def execute(self) -> int:
        run = self.run
        run.directory.create()
        emitter = EventEmitter(run.run_id, run.directory.events, stream=self.options.stream, sinks=[self._sink],
                               to_stream=not self.options.passthrough_stdio)
        run.emitter = emitter
        receiver = channel.ChannelReceiver(channel.new_address(run.run_id), self._on_child_message)
        previous = _install_signal_handlers(self)
        started_hooks = False
        status, terminal_payload, exit_code = "failed", {}, 1
        try:
            env = self.child_environment(receiver.address)
            receiver.start()
            run.emit("run_started", {"worker": run.worker, "algo": run.config.algo, "env_id": run.config.env_id,
                                     "total_timesteps": run.config.total_timesteps, "run_dir": str(run.run_dir),
                                     **self.options.started_payload})
            started_hooks = True
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
            _restore_signal_handlers(previous)
            receiver.close()
            self._finish(status, terminal_payload, started_hooks)
            emitter.close()
        return exit_code

    def _supervise(self) -> None:
        proc = self.process
        assert proc is not None
        started = time.monotonic()
        next_beat = started + self.options.heartbeat_interval
        while proc.poll() is None:
            if self._cancel_reason is not None:
                self.stop_group()
                return
            now = time.monotonic()
            if now >= next_beat:
                self._heartbeat(now - started)
                next_beat = now + self.options.heartbeat_interval
            self._wake.wait(min(0.2, max(0.0, next_beat - now)))
            self._wake.clear()
        # The child is gone; make sure nothing of its group survives it.
        if group_alive(proc.pid):
            self.stop_group()

    def _heartbeat(self, elapsed: float) -> None:
        payload: dict[str, Any] = {"elapsed_s": round(elapsed, 3), "pid": self.run.pid}
        try:
            payload.update(self.host.heartbeat_fields(self.run, reserved={"elapsed_s", "pid"}))
            if self.options.heartbeat_extra:
                payload.update(self.options.heartbeat_extra() or {})
        except Exception as exc:
            payload["plugin_error"] = str(exc)
        self.run.emit("heartbeat", payload)

    def _outcome(self) -> tuple[str, dict[str, Any], int]:
        logs = {"stdout": self.run.directory.relative(self.run.directory.log(self.run.worker, "stdout")),
                "stderr": self.run.directory.relative(self.run.directory.log(self.run.worker, "stderr"))}
        code = self.process.returncode if self.process is not None else None
        if self._cancel_reason is not None:
            note = read_cancel_note(self.run.directory)  # e.g. "pruned by the sweep at step 4096"
            reason = f"{note} ({self._cancel_reason})" if note else self._cancel_reason
            return "cancelled", {"reason": reason, "returncode": code, "logs": logs}, 130
        if code == 0:
            return "completed", {"returncode": 0, "logs": logs}, 0
        tail = _tail(self.run.directory.log(self.run.worker, "stderr"), STDERR_TAIL_LINES)
        if code is not None and code < 0:
            error = f"training process killed by signal {signal.Signals(-code).name}"
        else:
            error = _last_error_line(tail) or f"training process exited with code {code}"
        exit_code = code if code and code > 0 else 1
        return "failed", {"error": error, "returncode": code, "stderr_tail": tail, "logs": logs}, exit_code

    def _finish(self, status: str, payload: dict[str, Any], started_hooks: bool) -> None:
        run = self.run
        try:
            sections = self.host.build_manifest(run, status)
        except Exception as exc:
            sections = {"manifest_error": str(exc)}
        manifest = {"schema": MANIFEST_SCHEMA, "run_id": run.run_id, "worker": run.worker, "status": status,
                    "algo": run.config.algo, "env_id": run.config.env_id, "written_at": time.time(), **sections}
        try:
            write_json_atomic(run.directory.manifest, redact(manifest))
        except OSError as exc:
            payload.setdefault("manifest_error", str(exc))
        if started_hooks:
            for error in self.host.run_finished(run, status):
                print(f"mosaic: {error}", file=sys.stderr)
        run.emit(EVENT_OF[status], payload)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group of zombies still "exists"; count only live members.
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as fh:
                        fields = fh.read().rsplit(b")", 1)[1].split()
                    if int(fields[2]) == pgid and fields[0] != b"Z":
                        return True
                except (OSError, IndexError, ValueError):
                    continue
        return False
    except OSError:
        return True


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _last_error_line(tail: str) -> str | None:
    for line in reversed(tail.splitlines()):
        if line.strip():
            return line.strip()
    return None


def _cancel_from_signal(supervisor: Supervisor, signum: int) -> None:
    """Only an attribute is set here, no lock taken: the handler runs in the main thread, which
    may be inside ``Event.wait`` holding that event's lock (``cancel()`` would deadlock there).
    The supervising loop looks at the reason at least every 0.2 s."""
    if supervisor._cancel_reason is None:
        supervisor._cancel_reason = f"received {signal.Signals(signum).name}"


def _install_signal_handlers(supervisor: Supervisor) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, lambda signum, _frame: _cancel_from_signal(supervisor, signum))
    return previous


def _restore_signal_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
