"""A worker's Python facade, written once: the original MOSAIC gave each worker its own ``config``,
``runtime`` and ``telemetry`` modules (``cleanrl_worker.config``, ``xuance_worker.runtime``,
``ray_worker.telemetry``…); ours are names over these, so every worker's configs load, its runs
run and its lifecycle lines are written by the host's one pipeline (:mod:`mosaic_core.pipeline`)::

    # xuance_worker/runtime.py
    class XuanCeWorkerRuntime(WorkerRuntime):
        worker = "xuance"

Importing this module imports nothing heavy; a runtime's run imports what ``mosaic run`` imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from mosaic_core.config import WorkerConfig, parse_json, read_config_file, unwrap_config
from mosaic_core.errors import ConfigError
from mosaic_core.events import EventEmitter
from mosaic_core.pipeline import (
    DEFAULT_GRPC_TARGET,
    HostOptions,
    Prepared,
    execute,
    prepare,
    resolve_config,
    worker_option_defaults,
)
from mosaic_core.plugins import plugin_host
from mosaic_core.worker import load_worker
from mosaic_core.workers import find_worker

__all__ = [
    "LifecycleEmitter",
    "WorkerRuntime",
    "load_worker_config",
    "load_worker_config_from_string",
    "parse_worker_config",
]
STATUS_OF_EXIT = {0: "completed", 130: "cancelled"}  # any other exit code: "failed"


def parse_worker_config(
    worker: str, payload: Any, source: str | None = None, *, raw: Any = None, known_algorithms: bool = True
) -> WorkerConfig:
    """A validated config of ``worker``, read as a run reads it (:func:`mosaic_core.pipeline.resolve_config`):
    a flat worker config or a trainer payload holding ``metadata.worker.config``; in a flat config
    ``algorithm`` is ``algo`` and keys outside the schema are extras keys or the algorithm's
    hyperparameters; a missing ``run_id`` is generated, a missing ``env_id`` or ``total_timesteps``
    is the worker's default. A missing or bad field is a ConfigError naming it (exit 2). A
    ``worker`` key (as ``mosaic submit``'s files carry) must name ``worker``. ``raw``: the payload
    ``payload`` was read from, when not ``payload`` itself (the config's ``raw``).
    ``known_algorithms=False`` leaves ``algo`` unchecked (a caller with a registry of its own)."""
    item = find_worker(worker)
    implementation = load_worker(item)
    data = _this_workers(worker, unwrap_config(payload, source), source)
    config, _problems = resolve_config(
        item,
        implementation,
        plugin_host(),
        data=data,
        raw=payload if raw is None else raw,
        source=source,
        options=worker_option_defaults(implementation),
        known_algorithms=known_algorithms,
    )
    return config


def load_worker_config(worker: str, path: str | Path, *, known_algorithms: bool = True) -> WorkerConfig:
    """:func:`parse_worker_config` of a JSON file (strict JSON, UTF-8)."""
    loaded = read_config_file(path)
    return parse_worker_config(worker, dict(loaded), str(path), raw=loaded.raw, known_algorithms=known_algorithms)


def load_worker_config_from_string(
    worker: str, text: str, source: str = "<string>", *, known_algorithms: bool = True
) -> WorkerConfig:
    """:func:`parse_worker_config` of JSON text."""
    return parse_worker_config(
        worker, parse_json(text, "the config", source), source, known_algorithms=known_algorithms
    )


def _this_workers(worker: str, data: dict[str, Any], source: str | None) -> dict[str, Any]:
    if "worker" not in data:
        return data
    data = dict(data)
    named = data.pop("worker")
    if named != worker:
        raise ConfigError(f"the config is for worker {named!r}, not {worker!r}", field="worker", source=source)
    return data


Payload = dict[str, Any] | None


class LifecycleEmitter(EventEmitter):
    """The original's lifecycle lines (``event``, ``run_id``, ``timestamp``, ``payload``, plus
    our ``seq``): ``emit(event, payload)`` or one method per event; writes to ``stream`` (stdout
    by default) and, when given, appends to ``log_path`` (a run's ``events.jsonl``). Payloads
    are redacted; a run has one terminal event.

    Each method takes MOSAIC's ``(run_id, payload)`` — ``LifecycleEmitter().run_started(run_id,
    {...})`` as MOSAIC's CLI calls it — or ``(payload)`` for an emitter made for one run. An
    emitter writes one run's stream: a call naming another run is a ValueError."""

    def __init__(self, run_id: str | None = None, stream: IO[str] | None = None, log_path: str | Path | None = None):
        super().__init__(run_id or "", Path(log_path) if log_path else None, stream=stream)

    def _emit(self, event: str, run_id: str | Payload, payload: Payload) -> dict[str, Any] | None:
        if not isinstance(run_id, str):  # (payload): this emitter's run
            run_id, payload = None, run_id
        if run_id is not None:
            if self.run_id and run_id != self.run_id:
                raise ValueError(f"this LifecycleEmitter writes run {self.run_id}'s events, not {run_id}'s")
            self.run_id = run_id
        if not self.run_id:
            raise ValueError(f"{event}: name the run (LifecycleEmitter(run_id) or {event}(run_id, payload))")
        return self.emit(event, payload)

    def run_started(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_started", run_id, payload)

    def heartbeat(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("heartbeat", run_id, payload)

    def run_completed(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_completed", run_id, payload)

    def run_failed(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_failed", run_id, payload)

    def run_cancelled(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_cancelled", run_id, payload)


class WorkerRuntime:
    """A run of the worker named by the subclass's ``worker``, started from Python: the same
    config checks, plan, supervision, events and manifest as ``mosaic run --worker NAME``.
    ``run()`` dry-runs (``dry_run=True``: checks everything, starts and writes nothing) or runs
    under supervision; a subclass shapes what it returns (:meth:`summary`)."""

    worker = ""

    def __init__(
        self,
        config: WorkerConfig,
        *,
        use_grpc: bool = False,
        grpc_target: str = DEFAULT_GRPC_TARGET,
        dry_run: bool = False,
        runs_dir: str | Path | None = None,
        quiet: bool = True,
    ):
        self.config, self.use_grpc, self.grpc_target, self.dry_run = config, use_grpc, grpc_target, dry_run
        self.runs_dir, self.quiet = runs_dir, quiet
        self._prepared: Prepared | None = None

    def config_data(self) -> dict[str, Any]:
        """The config as the pipeline takes it (a subclass may adjust it)."""
        return self.config.to_dict(redacted=False)

    def prepare(self) -> Prepared:
        """The validated, planned run (once): what a dry run shows and a real run executes."""
        if self._prepared is None:
            item = find_worker(self.worker)
            implementation = load_worker(item)
            self._prepared = prepare(
                item,
                implementation,
                plugin_host(),
                data=self.config_data(),
                raw=self.config.raw,
                source=self.config.source,
                options=worker_option_defaults(implementation),
                runs_dir=None if self.runs_dir is None else str(self.runs_dir),
                quiet=self.quiet,
                dry_run=self.dry_run,
            )
        return self._prepared

    @property
    def run_dir(self) -> Path:
        """The run's directory (config, events, manifest, checkpoints)."""
        return self.prepare().run.run_dir

    def execute(self) -> str:
        """``"dry-run"``, or the run's end: ``"completed"``, ``"failed"`` or ``"cancelled"``."""
        prepared = self.prepare()
        if self.dry_run:
            return "dry-run"
        options = HostOptions(grpc=self.use_grpc, grpc_target=self.grpc_target, quiet=self.quiet)
        return STATUS_OF_EXIT.get(execute(prepared, options, plugin_host()), "failed")

    def summary(self, status: str, prepared: Prepared) -> Any:
        """What :meth:`run` returns: ``status``, the resolved ``config`` (redacted) and its
        ``extras``, the ``run_dir`` and the worker's plan (``launch``)."""
        config = prepared.config.to_dict()
        return {
            "status": status,
            "config": config,
            "extras": config["extras"],
            "run_dir": str(prepared.run.run_dir),
            "launch": prepared.launch.summary,
        }

    def run(self) -> Any:
        """Dry-run or run (see the class), then :meth:`summary`."""
        status = self.execute()
        return self.summary(status, self.prepare())
