"""The daemon's runs: a queue, at most ``max_concurrent`` processes, their JSONL stdout read
into the store, cancellation, the heartbeat watchdog, shutdown and restart recovery.

Each run is started as ``mosaic run --worker W --config <state>/configs/<id>.json --runs-dir
<state>/runs --grpc --grpc-target <daemon> --quiet`` (see :func:`mosaic_run_command`) in a
process group of its own, cwd = the state dir, stderr in ``<state>/logs/<id>.stderr.log``
(0600), from one long-lived spawner thread with a parent-death signal (SIGTERM: a killed
daemon's runs cancel themselves). Its environment carries what must not be in a file or on a
command line: the run's registration secret, its secret extras (the config file holds them
redacted) and the submission's ``environment`` (kept in memory only; see SECURITY.md).

A training program started by hand registers a run of its own (*attached*: the daemon has no
process of it): it reports its start and end through its session, and the heartbeat watchdog
fails it when it falls silent, as it does a spawned run.

After a restart, a run the last daemon left behind is recorded as its own ``events.jsonl``
says it ended (:mod:`mosaic_core.trainer.recovery`).
"""

from __future__ import annotations

import errno
import json
import os
import select
import sqlite3
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mosaic_core import resume as resuming
from mosaic_core.config import SECRET_EXTRAS_ENV, WorkerConfig, redact, secret_extras
from mosaic_core.events import TERMINAL
from mosaic_core.files import tail_lines
from mosaic_core.threads import SHARE_VAR, share
from mosaic_core.trainer import attached, processes
from mosaic_core.trainer.auth import REGISTRATION_ENV, TOKEN_ENV, new_secret, secrets_match
from mosaic_core.trainer.recovery import settle_interrupted
from mosaic_core.trainer.runspec import LaunchSpec, ManagerOptions, RunProcess, mosaic_run_command
from mosaic_core.trainer.store import (
    ACTIVE,
    EXEC,
    FAULT,
    HSHK,
    INIT,
    TERM,
    DuplicateRun,
    RunRow,
    RunStore,
    UnknownRun,
)
from mosaic_core.trainer.submission import Submission

__all__ = ["LaunchSpec", "ManagerOptions", "RunManager", "mosaic_run_command"]

KILL_MARGIN_S = 5.0  # the daemon waits this much longer than `mosaic run` itself before SIGKILL
PIPE_LINGER_S = 2.0  # after the worker exited, how long its stdout may stay open
SETTLE_TRIES = 60  # seconds a run's end may wait for a database it cannot write


class RunManager:
    def __init__(self, store: RunStore, options: ManagerOptions):
        self.store, self.options = store, options
        self.state_dir = Path(options.state_dir).absolute()
        self.runs_dir = self.state_dir / "runs"
        self.configs_dir = self.state_dir / "configs"
        self.logs_dir = self.state_dir / "logs"
        for folder in (self.runs_dir, self.configs_dir, self.logs_dir):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.RLock()
        self._secret_extras: dict[str, dict[str, Any]] = {}  # queued runs' secrets: in memory only
        self._environment: dict[str, dict[str, str]] = {}  # queued runs' `environment`: in memory only
        self._registration: dict[str, str] = {}  # run -> the secret its first RegisterWorker must show
        self._registration_lock = threading.Lock()  # not self._lock: RegisterWorker holds the store's lock
        self._issued: dict[str, str] = {}  # run -> its secret, used or not, while its process lives
        # One thread starts every run: the parent-death signal fires when *that thread* ends.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mosaic-spawner")
        self._queue: deque[str] = deque()
        self._procs: dict[str, RunProcess] = {}
        self._threads: list[threading.Thread] = []
        self.accepting = True
        self._closed = threading.Event()
        self._watchdog = threading.Thread(target=self._watch_heartbeats, name="mosaic-watchdog", daemon=True)

    # ------------------------------------------------------------------ public
    def start(self) -> None:
        self._recover()
        self._watchdog.start()
        self._schedule()

    @property
    def running(self) -> int:
        return len(self._procs)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, submission: Submission) -> RunRow:
        """Record a run (INIT), queue it, start it when a slot is free. DuplicateRun if it exists."""
        config = submission.config
        path = self.configs_dir / f"{config.run_id}.json"
        if submission.resume:
            row = self._resubmit(submission, path)
            self._schedule()
            return row
        with self._lock:
            if not self.store.room():
                raise OSError(
                    errno.ENOSPC,
                    f"no space left on device under {self.state_dir}; the daemon takes no new run until there is",
                )
            _write_private(path, config)  # first: a run is never recorded without its config
            try:
                row = self.store.insert(
                    run_id=config.run_id,
                    worker=submission.worker,
                    status=INIT,
                    digest=submission.digest,
                    config_json=json.dumps(config.to_dict()),
                    config_path=str(path),
                    run_dir=str(self.runs_dir / config.run_id),
                    metadata=json.dumps(submission.recorded),
                )
            except BaseException:
                path.unlink(missing_ok=True)
                raise
            self._keep_secrets(submission)
            self._queue.append(config.run_id)
        self.options.log(f"run {config.run_id}: submitted ({submission.worker} {config.algo} {config.env_id})")
        self._schedule()
        return row

    def resumable(self, run_id: str) -> RunRow | None:
        """The record of ``run_id`` when it ended unfinished (failed or cancelled) as a run this
        daemon started: a submission with its id resumes it."""
        row = self.store.get(run_id)
        if row is None or not row.final or row.terminal_event == "run_completed" or row.attached:
            return None
        return row

    def _resubmit(self, submission: Submission, path: Path) -> RunRow:
        """Queue an unfinished run again (INIT, its earlier end forgotten): its process resumes it."""
        config = submission.config
        with self._lock:
            if self.resumable(config.run_id) is None:  # resubmitted meanwhile
                raise DuplicateRun(config.run_id)
            _write_private(path, config)
            row = self.store.update(
                config.run_id,
                status=INIT,
                digest=submission.digest,
                config_json=json.dumps(config.to_dict()),
                failure_reason=None,
                terminal_event=None,
                terminal_payload=None,
                pid=None,
                pgid=None,
                exit_code=None,
                token_hash=None,
                worker_id=None,
                registration=None,
                last_heartbeat=None,
                metadata=json.dumps(submission.recorded),
            )
            self._keep_secrets(submission)
            self._queue.append(config.run_id)
        self.options.log(
            f"run {config.run_id}: resubmitted; it resumes ({submission.worker} {config.algo} {config.env_id})"
        )
        assert row is not None  # resumable() found it under the same lock
        return row

    def _keep_secrets(self, submission: Submission) -> None:
        """The run's secret extras and its environment, in memory only until its process starts."""
        config = submission.config
        secret = secret_extras(config.extras)
        if secret:
            self._secret_extras[config.run_id] = secret
        if submission.environment:
            self._environment[config.run_id] = dict(submission.environment)

    def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunRow | None:
        """Stop a queued or running run; returns its record (final for a queued one; None: no such run)."""
        with self._lock:
            row = self.store.get(run_id)
            if row is None or row.final:
                return row
            if run_id in self._queue:
                self._queue.remove(run_id)
                self._secret_extras.pop(run_id, None)
                self._environment.pop(run_id, None)
                return self.store.update(
                    run_id, status=TERM, terminal_event="run_cancelled", failure_reason=f"{reason} before it started"
                )
            proc = self._procs.get(run_id)
            if proc is not None:
                self._stop(proc, reason, TERM)
            return row

    def remove(self, run_id: str) -> int:
        """Delete an ended run (record, telemetry, files); RunStillActive while it has a process."""
        from mosaic_core.trainer.removal import RunStillActive, remove_recorded_run

        with self._lock:
            row = self.store.get(run_id)
            if row is None:
                raise UnknownRun(run_id)
            if run_id in self._procs or run_id in self._queue:
                raise RunStillActive(f"run {run_id!r} has not ended; cancel it first")
            freed = remove_recorded_run(self.store, self.state_dir, row)
        self.options.log(f"run {run_id}: removed ({freed} bytes freed)")
        return freed

    def registration_issued(self, presented: str | None) -> bool:
        """Whether ``presented`` is the registration secret given to a run whose process lives
        (used or not: the RPC gate's check before it reads a RegisterWorker's body; the
        servicer then decides whether it opens this registration)."""
        with self._registration_lock:
            return any(secrets_match(secret, presented) for secret in self._issued.values())

    def take_registration(self, run_id: str, presented: str | None) -> bool:
        """Whether ``presented`` is the registration secret of ``run_id``'s process; a secret
        opens one registration only."""
        with self._registration_lock:
            if secrets_match(self._registration.get(run_id), presented):
                del self._registration[run_id]
                return True
            return False

    def heartbeat(self, run_id: str) -> RunRow | None:
        return self.store.update(run_id, check=lambda r: not r.final, last_heartbeat=time.time())

    def wait_final(self, run_id: str, timeout: float) -> RunRow | None:
        deadline = time.monotonic() + timeout
        with self.store.changed:
            while True:
                row = self.store.get(run_id)
                if row is None or (row.final and run_id not in self._procs):
                    return row
                left = deadline - time.monotonic()
                if left <= 0:
                    return row
                self.store.changed.wait(min(left, 0.5))

    def shutdown(self, mode: str = "cancel", timeout: float | None = None) -> None:
        """Stop starting runs; cancel the running ones (``cancel``) or let them finish (``wait``).
        Queued runs stay queued in the store and start with the next daemon."""
        with self._lock:
            self.accepting = False
            if mode == "cancel":
                for proc in list(self._procs.values()):
                    self._stop(proc, "daemon shutting down", TERM)
        limit = (
            timeout
            if timeout is not None
            else (None if mode == "wait" else self.options.grace_period + 2 * KILL_MARGIN_S)
        )
        deadline = None if limit is None else time.monotonic() + limit
        while self._procs and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.05)
        self._closed.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        self._spawner.shutdown(wait=True)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self) -> None:
        with self._lock:
            while self.accepting and self._queue and len(self._procs) < self.options.max_concurrent:
                self._spawn(self._queue.popleft())

    def _spawn(self, run_id: str) -> None:
        self._spawner.submit(self._spawn_here, run_id).result()

    def _spawn_here(self, run_id: str) -> None:
        row = self.store.get(run_id)
        if row is None or row.status != INIT:
            return
        env = self._run_environment(row)
        # Recorded as launching before its process exists: a daemon killed between the two leaves
        # an active record, which the next daemon settles (finding the process by its config path),
        # never a queued one it would start a second time.
        if (
            env is None
            or self.store.update(run_id, check=lambda r: r.status == INIT, status=HSHK, last_heartbeat=time.time())
            is None
        ):
            return
        stderr_path = self.logs_dir / f"{run_id}.stderr.log"
        popen = self._start_process(row, env, stderr_path)
        if popen is None:
            return
        proc = RunProcess(run_id, popen, Path(row.run_dir), stderr_path)
        self._procs[run_id] = proc
        self.store.update(run_id, status=HSHK, pid=popen.pid, pgid=popen.pid, last_heartbeat=time.time())
        self.options.log(f"run {run_id}: started ({row.worker}, pid {popen.pid})")
        self._thread(self._read_stdout, proc, name=f"mosaic-run-{run_id}")

    def _launch_spec(self, row: RunRow) -> LaunchSpec:
        opts = self.options
        return LaunchSpec(
            run_id=row.run_id,
            worker=row.worker,
            config_path=Path(row.config_path),
            runs_dir=self.runs_dir,
            target=opts.target,
            heartbeat_interval=max(0.1, opts.heartbeat_timeout / 3),
            grace_period=opts.grace_period,
            resume=resuming.recorded(Path(row.run_dir)),
            run_flags=tuple(row.recorded.get("run_flags", ())),
        )

    def _run_environment(self, row: RunRow) -> dict[str, str] | None:
        """The run's process environment: what must not be in a file or on a command line (its
        registration secret, its secret extras, the submission's ``environment``) and its thread
        budget. None (the run failed, said) when the environment was another daemon's."""
        run_id, opts = row.run_id, self.options
        environment = self._environment.pop(run_id, {})
        lost = sorted(set(row.recorded.get("environment", [])) - set(environment))
        if lost:  # its values lived in the memory of the daemon that took it, never on disk
            reason = (
                f"its environment ({', '.join(lost)}) was given to an earlier daemon and kept only in its "
                "memory, never on disk; submit it again"
            )
            self.store.update(run_id, status=FAULT, terminal_event="run_failed", failure_reason=reason)
            opts.log(f"run {run_id}: not started: {reason}")
            return None
        secret = new_secret()
        env = {**os.environ, **environment, "PYTHONUNBUFFERED": "1", REGISTRATION_ENV: secret}
        for name in ("MOSAIC_CHILD", TOKEN_ENV):  # a run proves itself with its secret, never the client token
            env.pop(name, None)
        extras = self._secret_extras.pop(run_id, None)
        if extras:
            env[SECRET_EXTRAS_ENV] = json.dumps(extras)
        elif any(v == "***" for v in json.loads(row.config_json).get("extras", {}).values()):
            opts.log(f"run {run_id}: its secret extras were not kept across a daemon restart; it runs without them")
        with self._registration_lock:
            self._registration[run_id] = self._issued[run_id] = secret
        env.setdefault(SHARE_VAR, str(share(opts.max_concurrent)))  # its thread budget: a share of the CPUs
        return env

    def _start_process(self, row: RunRow, env: dict[str, str], stderr_path: Path) -> Any:
        """The run's process (a session of its own, stderr to its log); None when it could not
        start (the run failed, said; its registration withdrawn)."""
        run_id, opts = row.run_id, self.options
        try:
            argv = processes.die_with_parent([*opts.worker_command(self._launch_spec(row)), *opts.launcher_argv])
            err = os.open(stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                return subprocess.Popen(
                    argv,
                    cwd=self.state_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                )
            finally:
                os.close(err)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            with self._registration_lock:
                self._registration.pop(run_id, None)
                self._issued.pop(run_id, None)
            self.store.update(
                run_id,
                status=FAULT,
                terminal_event="run_failed",
                failure_reason=f"could not start the run's process: {exc}",
            )
            opts.log(f"run {run_id}: could not start the run's process: {exc}")
            return None

    def _thread(self, target: Callable[..., object], *args: Any, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    # ------------------------------------------------------------------ a run's stdout
    def _read_stdout(self, proc: RunProcess) -> None:
        """Read JSONL events until EOF. Once the worker has exited, its leftovers are stopped
        (one may hold the pipe open); reading then ends at EOF or after PIPE_LINGER_S."""
        fd = proc.popen.stdout.fileno()
        pending, exited_at = b"", None
        try:
            while True:
                if select.select([fd], [], [], 0.25)[0]:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self._on_line_kept(proc, line)
                elif proc.popen.poll() is not None:
                    if exited_at is None:
                        exited_at = time.monotonic()
                        self._stop_leftovers(proc)
                    elif time.monotonic() - exited_at > PIPE_LINGER_S:
                        break
        finally:
            if pending:
                self._on_line(proc, pending)
            proc.popen.stdout.close()
            proc.popen.wait()
            self._finished(proc)

    def _on_line_kept(self, proc: RunProcess, line: bytes) -> None:
        try:
            self._on_line(proc, line)
        except sqlite3.Error as exc:  # a full disk: this update is lost, the run goes on (its end is retried)
            self.options.log(f"run {proc.run_id}: could not record an event: {exc}")

    def _on_line(self, proc: RunProcess, line: bytes) -> None:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return  # not an event (a worker prints only JSONL on stdout; anything else is ignored)
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            self._on_event(proc, record)

    def _on_event(self, proc: RunProcess, record: dict[str, Any]) -> None:
        event, payload = record["event"], record.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        not_final = lambda row: not row.final
        now = time.time()
        if event in ("run_started", "heartbeat"):
            proc.tracked.scan(proc.popen.pid)  # the training process and its workers, while they are ours
        if event == "run_started":
            values: dict[str, Any] = {"status": EXEC, "last_heartbeat": now}
            reported = payload.get("run_dir")
            if isinstance(reported, str) and self._owns(reported):
                values["run_dir"] = reported
                proc.run_dir = Path(reported)
            self.store.update(proc.run_id, check=lambda r: r.status in ACTIVE, **values)
        elif event == "heartbeat":
            self.store.update(proc.run_id, check=not_final, last_heartbeat=now)
        elif event in TERMINAL:
            proc.terminal = record  # recorded once the process has exited (see _finished)

    def _settle(self, proc: RunProcess) -> None:
        """Record how a run ended, unless the daemon already decided (heartbeat timeout)."""
        event = proc.terminal["event"] if proc.terminal else None
        payload = proc.terminal.get("payload") if proc.terminal else None
        payload = payload if isinstance(payload, dict) else {}
        if proc.stop_reason is not None and proc.stop_status == FAULT:
            event = "run_failed"
        elif proc.stop_reason is not None and event in (None, "run_failed"):
            event = "run_cancelled"  # the daemon stopped it; a kill is not the run's failure
        code = proc.popen.poll()
        values: dict[str, Any] = {"terminal_payload": json.dumps(redact(payload), default=str)}
        if code is not None:
            values["exit_code"] = code
        if event == "run_completed":
            values.update(status=TERM, terminal_event=event)
        elif event == "run_cancelled":
            values.update(status=TERM, terminal_event=event, failure_reason=proc.stop_reason or payload.get("reason"))
        else:
            reason = payload.get("error") or self._exit_reason(proc, code)
            values.update(status=FAULT, terminal_event="run_failed", failure_reason=str(reason))
        row = self.store.update(proc.run_id, check=lambda r: not r.final, **values)
        if row is None and code is not None:  # already final: keep the verdict, add the exit code
            row = self.store.update(proc.run_id, exit_code=code)
        if row is None:  # final already, and no exit code to add: nothing was recorded
            return
        why = f": {row.failure_reason}" if row.failure_reason else ""
        self.options.log(f"run {proc.run_id}: {row.terminal_event} (exit code {code}){why}")

    def _exit_reason(self, proc: RunProcess, code: int | None) -> str:
        last = _last_line(proc.stderr_path)
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return f"the run's process {how} without a terminal event" + (f": {last}" if last else "")

    def _owns(self, path: str | Path) -> bool:
        """Whether ``path`` is a run directory under this daemon's runs dir."""
        resolved, root = Path(path).resolve(), self.runs_dir.resolve()
        return root in resolved.parents

    def _stop_leftovers(self, proc: RunProcess) -> None:
        """Stop what is left of a run: its ``mosaic run`` group, then the processes seen below it."""
        pgid = proc.popen.pid
        if processes.group_alive(pgid):
            proc.tracked.scan(pgid)
            processes.stop_group(pgid, 0.5, proc.popen)
        proc.tracked.stop()

    def _finished(self, proc: RunProcess) -> None:
        self._stop_leftovers(proc)
        for attempt in range(SETTLE_TRIES):  # a full disk may free up: the run's end is worth waiting for
            try:
                self._settle(proc)
                break
            except sqlite3.Error as exc:
                self.options.log(f"run {proc.run_id}: could not record its end ({exc}); try {attempt + 1}")
                if self._closed.wait(1.0):
                    break
        with self._lock:
            self._procs.pop(proc.run_id, None)
        with self._registration_lock:
            self._registration.pop(proc.run_id, None)
            self._issued.pop(proc.run_id, None)
        with self.store.changed:
            self.store.changed.notify_all()
        self._schedule()

    # ------------------------------------------------------------------ stopping
    def _stop(self, proc: RunProcess, reason: str, status: int) -> None:
        if proc.stop_reason is not None:
            return
        proc.stop_reason, proc.stop_status = reason, status
        if status == FAULT:
            self.store.update(
                proc.run_id,
                check=lambda r: not r.final,
                status=FAULT,
                terminal_event="run_failed",
                failure_reason=reason,
            )
        grace = self.options.grace_period + KILL_MARGIN_S
        proc.tracked.scan(proc.popen.pid)
        proc.stopper = self._thread(
            processes.stop_group, proc.popen.pid, grace, proc.popen, name=f"mosaic-stop-{proc.run_id}"
        )

    def _watch_heartbeats(self) -> None:
        timeout = self.options.heartbeat_timeout
        while not self._closed.wait(min(1.0, timeout / 4)):
            now = time.time()
            with self._lock:
                for proc in list(self._procs.values()):
                    row = self.store.get(proc.run_id)
                    if row is None or row.status not in ACTIVE or proc.stop_reason is not None:
                        continue
                    silent = now - (row.last_heartbeat or row.updated_at)
                    if silent > timeout:
                        self._stop(proc, f"no heartbeat for {silent:.1f} s (heartbeat timeout {timeout:g} s)", FAULT)
            attached.fail_silent(self.store, now, timeout, self.options.log)

    # ------------------------------------------------------------------ restart
    def _recover(self) -> None:
        """Runs that had a process when the last daemon died: a ``mosaic run`` still going is
        stopped first; then each is recorded as its ``events.jsonl`` says it ended. Queued
        runs are queued again."""
        for row in self.store.list(ACTIVE):
            if row.attached:  # its program is not ours and may still be going: the watchdog decides
                continue
            pgid = row.pgid or processes.find_leader(row.config_path)  # killed before it recorded the pid
            if pgid and processes.group_runs(pgid, row.config_path):
                self._thread(self._stop_leftover, row, pgid, name=f"mosaic-leftover-{row.run_id}")
            else:
                self._settle_interrupted(row)
        with self._lock:
            self._queue.extend(r.run_id for r in self.store.list([INIT]))

    def _stop_leftover(self, row: RunRow, pgid: int) -> None:
        if processes.group_runs(pgid, row.config_path):
            processes.stop_group(pgid, self.options.grace_period + KILL_MARGIN_S)
        self._settle_interrupted(row)

    def _settle_interrupted(self, row: RunRow) -> None:
        settled = settle_interrupted(self.store, self.runs_dir, row)
        if settled is not None:
            self.options.log(f"run {settled.run_id}: {settled.terminal_event} (found after a restart)")


def _write_private(path: Path, config: WorkerConfig) -> None:
    """The config the worker reads, redacted (its secrets reach it in its environment), owner-only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(config.to_dict(redacted=True), handle, indent=2, sort_keys=True)


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in tail_lines(path, 50, max_bytes=8192) if line.strip()]
    return lines[-1] if lines else ""
