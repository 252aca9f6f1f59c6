"""The trainer daemon: state dir, gRPC server, run manager, shutdown.

State dir layout (nothing is written outside it): ``trainer.sqlite3`` (runs, telemetry),
``daemon.lock`` (one daemon per state dir), ``daemon.json`` (pid and address while it
runs), ``configs/<run>.json`` (owner-only), ``logs/<run>.stderr.log``, ``runs/<run>/``.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import grpc

from mosaic_core.errors import MosaicError, UsageError
from mosaic_core.runs import write_json_atomic
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.manager import LaunchSpec, ManagerOptions, RunManager, mosaic_run_command
from mosaic_core.trainer.protocol import CHANNEL_OPTIONS, DEFAULT_LISTEN, check_target, is_loopback
from mosaic_core.trainer.store import RunStore
from mosaic_core.trainer.submission import detect_gpus

SHUTDOWN_MODES = ("cancel", "wait")


@dataclass
class DaemonOptions:
    state_dir: Path = Path("var/trainer")
    listen: str = DEFAULT_LISTEN
    max_concurrent: int = 4
    heartbeat_timeout: float = 90.0  # a run silent for longer is failed and stopped
    grace_period: float = 10.0  # a run's own SIGTERM → SIGKILL grace (the daemon adds a margin)
    on_shutdown: str = "cancel"  # or "wait": let running runs finish
    gpus: int | None = None  # None: detect
    rpc_threads: int = 64
    worker_command: Callable[[LaunchSpec], list[str]] = mosaic_run_command
    log: Callable[[str], None] = lambda message: None

    def check(self) -> None:
        check_target(self.listen, "--listen")
        if self.max_concurrent < 1:
            raise UsageError(f"--max-concurrent must be at least 1, got {self.max_concurrent}")
        if not self.heartbeat_timeout > 0:
            raise UsageError(f"--heartbeat-timeout must be > 0 seconds, got {self.heartbeat_timeout}")
        if self.grace_period < 0:
            raise UsageError(f"--grace-period must be >= 0 seconds, got {self.grace_period}")
        if self.on_shutdown not in SHUTDOWN_MODES:
            raise UsageError(f"--on-shutdown must be one of {', '.join(SHUTDOWN_MODES)}, got {self.on_shutdown!r}")
        if self.gpus is not None and self.gpus < 0:
            raise UsageError(f"--gpus must be >= 0, got {self.gpus}")


class TrainerDaemon:
    """``start()`` binds and serves; ``stop()`` shuts down as configured. One per state dir."""

    def __init__(self, options: DaemonOptions):
        options.check()
        self.options = options
        self.state_dir = Path(options.state_dir).absolute()
        self.pid = os.getpid()
        self.started_at = time.time()
        self.gpus = detect_gpus() if options.gpus is None else options.gpus
        self.address = ""
        self.closing = False
        self._lock_file = None
        self._workers = None
        self.store: RunStore | None = None
        self.manager: RunManager | None = None
        self._server: grpc.Server | None = None

    def workers(self, refresh: bool = False):
        from mosaic_core.workers import discover_workers

        if refresh or self._workers is None:
            self._workers = discover_workers()
        return self._workers

    def start(self) -> str:
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._lock_state_dir()
        except OSError as exc:
            raise MosaicError(f"cannot use the state dir {self.state_dir}: {exc.strerror or exc}") from None
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> str:
        opts = self.options
        self.workers()
        self.store = RunStore(self.state_dir / "trainer.sqlite3")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=opts.rpc_threads, thread_name_prefix="mosaic-rpc"),
                             options=[*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0)])
        try:
            port = server.add_insecure_port(opts.listen)
        except RuntimeError as exc:
            raise MosaicError(f"cannot listen on {opts.listen}: {exc}") from None
        if not port:
            raise MosaicError(f"cannot listen on {opts.listen} (address in use or not available)")
        host, _ = check_target(opts.listen, "--listen")
        self.address = f"{host}:{port}"
        worker_host = host if host not in ("0.0.0.0", "[::]") else "127.0.0.1"
        self.manager = RunManager(self.store, ManagerOptions(
            state_dir=self.state_dir, target=f"{worker_host}:{port}", max_concurrent=opts.max_concurrent,
            heartbeat_timeout=opts.heartbeat_timeout, grace_period=opts.grace_period,
            worker_command=opts.worker_command, log=opts.log))
        from mosaic_core.trainer.server import TrainerServicer

        pb_grpc.add_TrainerServiceServicer_to_server(TrainerServicer(self), server)
        server.start()
        self._server = server
        self.manager.start()
        write_json_atomic(self.state_dir / "daemon.json", {
            "pid": self.pid, "listen_address": self.address, "started_at": self.started_at,
            "state_dir": str(self.state_dir), "loopback_only": is_loopback(host)})
        return self.address

    def stop(self) -> None:
        """Accept no more runs, cancel (or wait for) the running ones, then stop serving."""
        if self._lock_file is None:
            return  # never started (or stopped already)
        if self.manager is not None:
            self.manager.shutdown(self.options.on_shutdown)
        self.closing = True
        if self.store is not None:
            with self.store.changed:
                self.store.changed.notify_all()
        if self._server is not None:
            self._server.stop(grace=1.0).wait()
            self._server = None
        if self.store is not None:
            self.store.close()
            self.store = None
        try:
            (self.state_dir / "daemon.json").unlink()
        except FileNotFoundError:
            pass
        self._release()

    # ------------------------------------------------------------------ state dir lock
    def _lock_state_dir(self) -> None:
        path = self.state_dir / "daemon.lock"
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            handle.close()
            raise MosaicError(f"another trainer daemon (pid {owner}) is using the state dir {self.state_dir}") from None
        handle.truncate(0)
        handle.write(str(self.pid))
        handle.flush()
        self._lock_file = handle

    def _release(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


def serve(options: DaemonOptions, on_ready: Callable[[TrainerDaemon], None] | None = None) -> int:
    """Run a daemon until SIGTERM/SIGINT (main thread); returns the exit code."""
    daemon = TrainerDaemon(options)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.start()
        if on_ready:
            on_ready(daemon)
        while not stop.wait(0.5):
            pass
    finally:
        daemon.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
