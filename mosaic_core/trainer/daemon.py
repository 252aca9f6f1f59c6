"""The trainer daemon: state dir, gRPC server, run manager, shutdown.

State dir layout (nothing is written outside it; the dir is 0700, every file in it 0600):
``trainer.sqlite3`` (runs, telemetry; ``trainer.sqlite3.reserve``, space kept for a full disk), ``daemon.lock`` (one daemon per state dir),
``daemon.json`` (pid and address while it runs), ``client.token`` (the client credential,
new at every start), ``configs/<run>.json`` (redacted: secrets travel in the run's
environment), ``logs/<run>.stderr.log``, ``runs/<run>/``. See SECURITY.md.
"""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import grpc

from mosaic_core.errors import MosaicError, UsageError
from mosaic_core.files import write_json_atomic
from mosaic_core.threads import usable_cpus
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import UNARY_RESERVE, RpcGate, write_token
from mosaic_core.trainer.manager import LaunchSpec, ManagerOptions, RunManager, mosaic_run_command
from mosaic_core.trainer.protocol import DEFAULT_LISTEN, SERVER_OPTIONS, check_target, is_loopback
from mosaic_core.trainer.store import RunStore
from mosaic_core.trainer.submission import detect_gpus

if TYPE_CHECKING:
    from mosaic_core.entrypoints import LoadedEntryPoint

SHUTDOWN_MODES = ("cancel", "wait")
PRIVATE_DIR = 0o700


@dataclass
class DaemonOptions:
    state_dir: Path = Path("var/trainer")
    listen: str = DEFAULT_LISTEN
    max_concurrent: int | None = None  # None: one run per usable CPU
    heartbeat_timeout: float = 90.0  # a run silent for longer is failed and stopped
    grace_period: float = 10.0  # a run's own SIGTERM → SIGKILL grace (the daemon adds a margin)
    on_shutdown: str = "cancel"  # or "wait": let running runs finish
    gpus: int | None = None  # None: detect
    rpc_threads: int = 64  # streams may hold all but UNARY_RESERVE of them
    insecure: bool = False  # no client token (today's behaviour); loopback only
    allow_scripts: tuple[Path, ...] = ()  # directories whose .py scripts a submitted `algo` may name
    allow_any_script: bool = False
    launcher_argv: tuple[str, ...] = ()  # where runs execute: LauncherChoice.argv(), on each `mosaic run`
    telemetry_items_per_run: int = 200_000  # steps and episodes together; more are dropped (counted)
    telemetry_bytes_per_run: int = 256 * 1024 * 1024
    worker_command: Callable[[LaunchSpec], list[str]] = mosaic_run_command
    log: Callable[[str], None] = lambda message: None

    def check(self) -> None:
        host, _ = check_target(self.listen, "--listen")
        if self.insecure and not is_loopback(host):
            raise UsageError(
                f"--listen {self.listen} is reachable beyond this machine: refusing to serve it without the "
                "client token (--insecure); TLS is not built, so prefer loopback or an SSH tunnel"
            )
        if self.max_concurrent is None:
            self.max_concurrent = usable_cpus()
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
        if self.rpc_threads <= UNARY_RESERVE:
            raise UsageError(f"rpc_threads must be more than {UNARY_RESERVE}, got {self.rpc_threads}")
        for folder in self.allow_scripts:
            if not Path(folder).is_absolute() or not Path(folder).is_dir():
                raise UsageError(f"--allow-scripts {folder}: not an absolute path to a directory")


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
        self.token: str | None = None
        self.closing = False
        self._lock_file: TextIO | None = None
        self._workers: list[LoadedEntryPoint] | None = None
        self.store: RunStore | None = None
        self.manager: RunManager | None = None
        self._server: grpc.Server | None = None

    def workers(self, refresh: bool = False) -> list[LoadedEntryPoint]:
        from mosaic_core.workers import discover_workers

        if refresh or self._workers is None:
            self._workers = discover_workers()
        return self._workers

    def start(self) -> str:
        try:
            self._private_state_dir()
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
        try:
            self.token = None if opts.insecure else write_token(self.state_dir)
        except OSError as exc:
            raise MosaicError(f"cannot write the client token in {self.state_dir}: {exc.strerror or exc}") from None
        gate = RpcGate(
            self.token, max_streams=opts.rpc_threads - UNARY_RESERVE, program_credential=self._program_credential
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=opts.rpc_threads, thread_name_prefix="mosaic-rpc"),
            options=SERVER_OPTIONS,
            interceptors=[gate],
        )
        try:
            port = server.add_insecure_port(opts.listen)
        except RuntimeError as exc:
            raise MosaicError(f"cannot listen on {opts.listen}: {exc}") from None
        if not port:
            raise MosaicError(f"cannot listen on {opts.listen} (address in use or not available)")
        host, _ = check_target(opts.listen, "--listen")
        self.address = f"{host}:{port}"
        worker_host = host if host not in ("0.0.0.0", "[::]") else "127.0.0.1"
        self.manager = RunManager(
            self.store,
            ManagerOptions(
                state_dir=self.state_dir,
                target=f"{worker_host}:{port}",
                max_concurrent=opts.max_concurrent or usable_cpus(),  # check() has set it
                heartbeat_timeout=opts.heartbeat_timeout,
                grace_period=opts.grace_period,
                worker_command=opts.worker_command,
                launcher_argv=opts.launcher_argv,
                log=opts.log,
            ),
        )
        from mosaic_core.trainer.server import TrainerServicer

        pb_grpc.add_TrainerServiceServicer_to_server(TrainerServicer(self), server)
        server.start()
        self._server = server
        self.manager.start()
        write_json_atomic(
            self.state_dir / "daemon.json",
            {
                "pid": self.pid,
                "listen_address": self.address,
                "started_at": self.started_at,
                "state_dir": str(self.state_dir),
                "loopback_only": is_loopback(host),
                "token_required": self.token is not None,
            },
            mode=0o600,
        )
        return self.address

    def _program_credential(self, session: str | None, secret: str | None) -> bool:
        """A session token of a run's training program or the registration secret of a live run's process
        (of any run: the servicer checks it is the named run's)."""
        from mosaic_core.trainer.store import hash_token

        store, manager = self.store, self.manager
        if store is None or manager is None:  # not serving yet: no credential is valid
            return False
        return bool(
            (session and store.get_by_token(hash_token(session)) is not None)
            or (secret and manager.registration_issued(secret))
        )

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
        for name in ("daemon.json", "client.token"):  # the token dies with the daemon that made it
            try:
                (self.state_dir / name).unlink()
            except FileNotFoundError:
                pass
        self._release()

    # ------------------------------------------------------------------ state dir
    def _private_state_dir(self) -> None:
        """The state dir exists, is ours and is 0700 (made so if it was looser)."""
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        info = os.stat(self.state_dir, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            raise MosaicError(f"the state dir {self.state_dir} is not a directory")
        if info.st_uid != os.geteuid():
            raise MosaicError(
                f"the state dir {self.state_dir} belongs to uid {info.st_uid}, not to this user "
                f"(uid {os.geteuid()}); a daemon keeps its state in a directory of its own"
            )
        if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
            os.chmod(self.state_dir, PRIVATE_DIR)

    def _lock_state_dir(self) -> None:
        path = self.state_dir / "daemon.lock"
        handle = os.fdopen(
            os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600), "a+", encoding="utf-8"
        )
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
