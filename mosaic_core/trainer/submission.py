"""SubmitRun's config: size caps, pick the worker, gate code paths, validate as a dry run would.

The config is a worker config (flat) or MOSAIC's trainer payload around it
(:mod:`mosaic_core.trainer.payload`: ``metadata.worker.config``, ``.module``, ``.arguments``,
``metadata.ui``, ``environment``…), with one more optional key, ``worker`` (default: the
module's worker, else :func:`mosaic_core.choice.choose_worker`, as for ``mosaic run``).
:class:`ConfigError` means the request is malformed (INVALID_ARGUMENT); :class:`PreconditionError`
means it is well formed but cannot run here (FAILED_PRECONDITION), e.g. it asks for a GPU on a
host without one or names a script the daemon's owner did not allow. Nothing is stored before
all of this has passed; a dry run (``--dry-run`` among the arguments) stores nothing at all.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core.config import WorkerConfig, build_config, parse_json
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, MosaicError, PluginError
from mosaic_core.threads import THREAD_VARS
from mosaic_core.trainer import selection
from mosaic_core.trainer.arguments import WorkerArguments, host_overrides, read_arguments
from mosaic_core.trainer.payload import Payload, different_interpreter, read_payload
from mosaic_core.types import CodePath
from mosaic_core.workers import unknown_worker

if TYPE_CHECKING:
    from mosaic_core.stages.plan import Prepared
    from mosaic_core.trainer.store import RunRow

SOURCE = "config_json"
MAX_CONFIG_BYTES = 256 * 1024  # a worker config is a few hundred bytes; this leaves room, not 63 MiB


@dataclass(frozen=True)
class ScriptPolicy:
    """Which submitted code paths the daemon's owner allows (``--allow-scripts``, ``--allow-any-script``)."""

    allowed_dirs: tuple[Path, ...] = ()
    allow_any: bool = False

    def check(self, field: str, value: str) -> None:
        """Refuse a path outside the allowed dirs, lexically first: before anything looks at
        the file (a refusal must not tell the submitter whether the file exists); then the
        same path resolved (symlinks followed) must be inside an allowed dir too."""
        if self.allow_any:
            return
        path = Path(os.path.normpath(value)) if os.path.isabs(value) else None
        if path is None or not any(path == d or Path(d) in path.parents for d in self.allowed_dirs):
            allowed = ", ".join(map(str, self.allowed_dirs)) or "none"
            raise PreconditionError(
                f"{field} names code by path; this daemon runs only installed code and "
                f"absolute paths inside the directories its owner allowed (--allow-scripts: "
                f"{allowed})"
            )
        real = Path(os.path.realpath(path))
        if not any(
            real == Path(os.path.realpath(d)) or Path(os.path.realpath(d)) in real.parents for d in self.allowed_dirs
        ):
            raise PreconditionError(f"{field} resolves to {real}, outside the directories this daemon's owner allowed")

    def check_all(self, paths: list[CodePath]) -> None:
        """Check every code path a worker declared (``Worker.code_paths``, ``Launch.code_paths``)."""
        for code in paths:
            self.check(code.field, code.path)


class PreconditionError(MosaicError):
    """The config is valid but this daemon cannot run it."""


@dataclass(frozen=True)
class Submission:
    worker: str
    config: WorkerConfig
    digest: str
    resume: bool = False  # the run id names an unfinished run of this daemon: it continues from its checkpoint
    dry_run: bool = False  # validated only: nothing is stored or started
    summary: dict[str, Any] | None = None  # a dry run's resolved summary (`--dry-run --emit-summary`'s)
    environment: dict[str, str] = field(default_factory=dict, repr=False)  # for the run's processes; never on disk
    recorded: dict[str, Any] = field(default_factory=dict)  # the run's metadata (the payload but its config; redacted)
    run_flags: tuple[str, ...] = ()  # passed on to the run's command line (the worker's own flags…)
    notes: tuple[str, ...] = ()  # one line each: where the daemon does a payload's field differently

    @property
    def run_id(self) -> str:
        return self.config.run_id


def detect_gpus() -> int:
    """NVIDIA devices visible to this host (no torch import): ``/dev/nvidiaN``, narrowed by
    ``CUDA_VISIBLE_DEVICES``."""
    devices = len(glob.glob("/dev/nvidia[0-9]*"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and not v.strip().startswith("-")]
        devices = min(devices, len(ids))
    return devices


def config_digest(worker: str, config: WorkerConfig) -> str:
    canonical = json.dumps(
        {"worker": worker, **config.to_dict(redacted=False)}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def parse_submission(
    config_json: str,
    run_id: str,
    workers: list[LoadedEntryPoint],
    gpus: int,
    *,
    runs_dir: Path | str | None = None,
    scripts: ScriptPolicy = ScriptPolicy(),
    taken: Callable[[str], bool] = lambda run_id: False,
    resumable: Callable[[str], RunRow | None] = lambda run_id: None,
    target: str | None = None,
) -> Submission:
    """A validated submission, or ConfigError / PreconditionError naming the field, as one
    printable line whatever the config held (DuplicateRun, from :mod:`mosaic_core.trainer.store`,
    when ``taken(run_id)`` and not ``resumable(run_id)``: a run that ended unfinished, which the
    submission resumes from its newest checkpoint, as ``mosaic resume`` does). ``target``: the
    address the daemon's runs register with (a payload's ``grpc_target`` naming another is noted)."""
    from mosaic_core.cli.errors import one_line

    try:
        return _parse_submission(config_json, run_id, workers, gpus, runs_dir, scripts, taken, resumable, target)
    except (ConfigError, PreconditionError) as exc:
        message = one_line(str(exc))
        if message == str(exc):
            raise
        raise type(exc)(message) from None


def _read_config_json(config_json: str) -> Payload:
    """The submitted payload: bounded, strict JSON, no NUL anywhere."""
    size = len(config_json.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config_json is {size} bytes; at most {MAX_CONFIG_BYTES} are accepted", field="config_json", source=SOURCE
        )
    data = parse_json(config_json, "config_json", SOURCE, field="config_json")
    _refuse_nul(data, "")
    return read_payload(data)


def _existing(
    wanted: Any,
    worker: str,
    raw: dict[str, Any],
    taken: Callable[[str], bool],
    resumable: Callable[[str], RunRow | None],
) -> str | None:
    """``"resume"`` when the submission names a run this daemon has and may continue; a run id
    that is taken and cannot be continued is a DuplicateRun."""
    from mosaic_core.trainer.store import DuplicateRun

    if not (isinstance(wanted, str) and wanted and taken(wanted)):
        return None
    earlier = resumable(wanted)
    if earlier is None:
        raise DuplicateRun(wanted)
    _check_resumed(earlier, worker, raw)
    return "resume"


def _parse_submission(
    config_json: str,
    run_id: str,
    workers: list[LoadedEntryPoint],
    gpus: int,
    runs_dir: Path | str | None,
    scripts: ScriptPolicy,
    taken: Callable[[str], bool],
    resumable: Callable[[str], RunRow | None],
    target: str | None,
) -> Submission:
    from mosaic_core.worker import load_worker

    payload = _read_config_json(config_json)
    _refuse_missing_gpus(payload, gpus)
    raw = dict(payload.config)
    worker, algorithms = _worker_of(payload, raw, workers)
    item = _find_worker(worker, workers)
    arguments = read_arguments(payload.arguments, load_worker(item), worker)
    raw = _with_ids(arguments.apply(raw), payload)
    for where, module, algo in algorithms:
        raw = selection.check_algorithm(where, module, algo, raw)
    run_id = run_id or str(arguments.overrides.get("run_id") or "")
    existing = _existing(run_id or raw.get("run_id"), worker, raw, taken, resumable)
    try:  # what this host cannot offer is said first (before the dry run's own complaints)
        check_capabilities(
            item, build_config(raw, source=SOURCE, overrides={"run_id": run_id or None}, generate_run_id=True), gpus
        )
    except ConfigError:
        pass  # incomplete before the worker's defaults: the dry run below says what is wrong
    prepared = prepared_run(item, raw, run_id, runs_dir, scripts, existing, arguments.options)
    config = prepared.config
    check_capabilities(item, config, gpus)
    _refuse_host_environment(payload.environment, prepared)
    return Submission(
        worker=worker,
        config=config,
        digest=config_digest(worker, config),
        resume=existing is not None,
        dry_run=arguments.dry_run,
        summary=_summary(prepared, payload) if arguments.dry_run else None,
        environment=payload.environment,
        recorded=_recorded(payload, config, arguments),
        run_flags=arguments.passed_on,
        notes=_notes(payload, arguments, target, gpus),
    )


def _worker_of(
    payload: Payload, raw: dict[str, Any], workers: list[LoadedEntryPoint]
) -> tuple[str, list[tuple[str, str, str]]]:
    """The submission's worker (``worker``, the modules', or the default choice) and the
    algorithms its modules name."""
    named = payload.worker if payload.worker is not None else raw.pop("worker", None)
    if named is not None and (not isinstance(named, str) or not named):
        raise ConfigError(f"worker must be a worker name, got {named!r}", field="worker", source=SOURCE)
    return selection.choose(named, list(payload.modules), {**raw, **host_overrides(payload.arguments)}, workers)


def _with_ids(raw: dict[str, Any], payload: Payload) -> dict[str, Any]:
    """MOSAIC's ``metadata.ui.worker_id`` / ``agent_id`` where the config has none: the worker id
    (RegisterWorker's), and the agent id (``extras.agent_id``, the run's recorded agent name)."""
    raw = dict(raw)
    if payload.worker_id and raw.get("worker_id") in (None, ""):
        raw["worker_id"] = payload.worker_id
    extras = raw.get("extras")
    if payload.agent_id and raw.get("agent_id") in (None, "") and isinstance(extras, dict | None):
        if not (extras or {}).get("agent_id"):
            raw["extras"] = {**(extras or {}), "agent_id": payload.agent_id}
    return raw


def _refuse_host_environment(environment: dict[str, str], prepared: Prepared) -> None:
    """A payload's variable the host sets for this run would lose to it: refused, not dropped."""
    clash = sorted(set(environment) & (set(prepared.env) - set(THREAD_VARS)))
    if clash:
        raise ConfigError(
            f"environment.{clash[0]}: the host sets it for this run (its worker or a plugin), and the host's "
            "value would win; MOSAIC exported the payload's. Leave it out, or set what the host reads instead",
            field=f"environment.{clash[0]}",
            source=SOURCE,
        )


def _summary(prepared: Prepared, payload: Payload) -> dict[str, Any]:
    """What ``--dry-run --emit-summary`` prints, with the payload's environment names (never values)."""
    return {**prepared.summary(), "environment": sorted(payload.environment)}


def _recorded(payload: Payload, config: WorkerConfig, arguments: WorkerArguments) -> dict[str, Any]:
    agent = getattr(config, "agent_id", None) or config.extras.get("agent_id")
    return {
        **({"payload": payload.recorded} if payload.recorded else {}),
        **({"agent_id": agent} if agent else {}),
        **({"run_flags": list(arguments.passed_on)} if arguments.passed_on else {}),
        **({"environment": sorted(payload.environment)} if payload.environment else {}),
    }


def _notes(payload: Payload, arguments: WorkerArguments, target: str | None, gpus: int) -> tuple[str, ...]:
    """Where this daemon does a payload's field differently from MOSAIC's, one line each."""
    notes = []
    named = arguments.grpc_target or payload.grpc_target
    if named and target and named != target:
        notes.append(
            f"grpc target {named}: MOSAIC's worker registered with the daemon it named; this daemon's runs "
            f"register with it ({target})"
        )
    interpreter = different_interpreter(payload.entry_point)
    if interpreter:
        notes.append(interpreter)
    if payload.gpus_requested and gpus == 0:
        notes.append(
            f"resources.gpus asks for {payload.gpus_requested} GPU(s), not mandatory; this host has none: it runs on CPU"
        )
    return tuple(notes)


def _refuse_missing_gpus(payload: Payload, gpus: int) -> None:
    """MOSAIC's ``resources.gpus`` with ``mandatory``: a host without a GPU cannot run it."""
    if payload.gpus_requested and payload.gpus_mandatory and gpus == 0:
        raise PreconditionError(
            f"resources.gpus asks for {payload.gpus_requested} GPU(s) (mandatory) and this host has none"
        )


def _check_resumed(earlier: RunRow, worker: str, raw: dict[str, Any]) -> None:
    """A resubmission continues its run: the same worker, algorithm and env."""
    from mosaic_core.resume import check_recorded

    if earlier.worker != worker:
        raise ConfigError(
            f"run {earlier.run_id} is a run of worker {earlier.worker!r}, not {worker!r}: it cannot "
            "continue as another run; choose another run_id",
            field="worker",
            source=SOURCE,
        )
    check_recorded(json.loads(earlier.config_json), raw, earlier.run_id)


def prepared_run(
    item: LoadedEntryPoint,
    raw: dict[str, Any],
    run_id: str,
    runs_dir: Path | str | None = None,
    scripts: ScriptPolicy = ScriptPolicy(),
    existing: str | None = None,
    options: dict[str, Any] | None = None,
) -> Prepared:
    """The run as ``mosaic run --dry-run`` prepares it: defaults, validation by the host, the
    plugins and the worker (with its own flags, ``options``), the run directory, and the
    worker's plan. Every code path the worker declares (before the plan reads it) and its
    launch executes (after) is held to the daemon's script policy, whatever the worker."""
    from mosaic_core.pipeline import prepare, worker_option_defaults
    from mosaic_core.plugins import plugin_host
    from mosaic_core.worker import load_worker

    worker, host = load_worker(item), plugin_host()
    try:
        prepared = prepare(
            item,
            worker,
            host,
            data=raw,
            source=SOURCE,
            overrides={"run_id": run_id or None},
            options=options if options is not None else worker_option_defaults(worker),
            runs_dir=str(runs_dir) if runs_dir else None,
            quiet=True,
            check_code=scripts.check_all,
            existing=existing,
        )
    except PluginError as exc:  # a broken plugin or worker on this host: not the submitter's fault
        raise PreconditionError(str(exc)) from None
    return prepared


def _refuse_nul(value: Any, where: str) -> None:
    """No string in a config may hold NUL: it cannot reach a command line or a file name."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if "\x00" in str(key):
            raise ConfigError(
                f"{where or 'the config'} has a key holding a NUL character", field=where or None, source=SOURCE
            )
        field = f"{where}.{key}" if where else str(key)
        if isinstance(item, str) and "\x00" in item:
            raise ConfigError(f"{field} holds a NUL character", field=field, source=SOURCE)
        _refuse_nul(item, field)


def _find_worker(name: str, workers: list[LoadedEntryPoint]) -> LoadedEntryPoint:
    for item in workers:
        if item.name == name:
            if item.status != "active":
                raise PreconditionError(f"worker {name!r} is installed but {item.status}: {item.error}")
            return item
    raise ConfigError(unknown_worker(name, workers), field="worker", source=SOURCE)


def check_capabilities(item: LoadedEntryPoint, config: WorkerConfig, gpus: int) -> None:
    """Refuse what this host cannot run, from the worker's declared capabilities (and the
    worker's ``gpu_request``, when it has one) and the host-owned trainer-protocol keys."""
    from mosaic_core.worker import load_worker

    name, caps, extras = item.name, item.obj.capabilities, config.extras
    if caps.requires_gpu and gpus == 0:
        raise PreconditionError(f"worker {name!r} requires a GPU and this host has none")
    asked = load_worker(item).gpu_request(config)
    if asked and gpus == 0:
        raise PreconditionError(
            f"{asked} asks for a GPU and this host has none; set it to false or submit to a daemon on a GPU host"
        )
    if extras.get("supports_pause") is True and not caps.supports_pause_resume:
        raise PreconditionError(f"extras.supports_pause is true but worker {name!r} cannot pause")
    if extras.get("supports_checkpoint") is True and not caps.supports_checkpointing:
        raise PreconditionError(f"the config needs checkpoints but worker {name!r} does not support them")
