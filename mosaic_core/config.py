"""Worker configs: load (flat or nested under ``metadata.worker.config``), override, validate,
redact. Every error names the field and the file, and is a :class:`ConfigError` (exit 2).
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mosaic_core.errors import ConfigError

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,127}")
SECRET_MARKERS = ("api_key", "apikey", "token", "password", "secret")
REDACTED = "***"
SECRET_EXTRAS_ENV = (
    "MOSAIC_SECRET_EXTRAS"  # a JSON object merged into a run's extras, read once (never on a command line)
)
REQUIRED = ("run_id", "algo", "env_id", "total_timesteps")
FIELDS = ("run_id", "algo", "env_id", "total_timesteps", "seed", "worker_id", "extras")  # the config's schema
MAX_DEPTH = 32  # nesting a worker config never needs; deeper input is refused, not recursed into
MAX_SEED = 2**32 - 1  # numpy's seeding range (torch accepts more, gymnasium passes seeds to numpy)
MAX_STEPS = 2**63 - 1  # int64: what the scripts' counters and TensorBoard steps hold


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


def redact(value: Any) -> Any:
    """A copy of ``value`` with every secret-named key's value replaced by ``***``."""
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "") else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def secret_extras(extras: dict[str, Any]) -> dict[str, Any]:
    """The items of ``extras`` that hold a secret (what :func:`redact` masks, at any depth)."""
    return {key: value for key, value in extras.items() if redact({key: value}) != {key: value}}


def extras_for_child(extras: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``extras`` split for a ``mosaic run`` we start: what its command line may carry
    (``--extras``, which any local user reads in ``/proc``) and the environment that carries
    the secret items (:data:`SECRET_EXTRAS_ENV`, which ``mosaic run`` reads once and removes)."""
    secrets = secret_extras(extras)
    shown = {key: value for key, value in extras.items() if key not in secrets}
    return shown, ({SECRET_EXTRAS_ENV: json.dumps(secrets)} if secrets else {})


def redact_payload(payload: Any) -> Any:
    """A loaded payload (:attr:`WorkerConfig.raw`) as it may be shown: :func:`redact`, and every
    value of a trainer payload's ``environment`` object masked (it carries credentials under any
    name: ``WANDB_API_KEY``, ``WANDB_EMAIL``…)."""
    shown = redact(payload)
    if isinstance(shown, dict) and isinstance(shown.get("environment"), dict):
        shown["environment"] = {name: REDACTED for name in shown["environment"]}
    return shown


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_run_id() -> str:
    """A ULID: milliseconds since the epoch (48 bits) then 80 random bits, in Crockford's base32
    (26 characters that sort by time). Made here: python-ulid's import reads installed metadata,
    which cost each ``mosaic run`` more than the rest of its start-up."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


MAX_NAME = 1000  # characters of algo, env_id, worker_id: a name or a path, never a page
_NOT_IN_NAMES = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")  # controls, line breaks, lone surrogates
_NOT_ANYWHERE = re.compile(r"[\x00\ud800-\udfff]")  # NUL and lone surrogates reach no command line, file or terminal


def _check_name(name: str, value: str, source: str | None) -> None:
    if len(value) > MAX_NAME:
        raise ConfigError(f"{name} is {len(value):,} characters long; at most {MAX_NAME:,}", field=name, source=source)
    bad = _NOT_IN_NAMES.search(value)
    if bad:
        raise ConfigError(
            f"{name} holds the control character {bad.group()!r} at position {bad.start()}", field=name, source=source
        )


def _check_text(value: Any, where: str, source: str | None) -> None:
    """No string in ``value`` (keys included, at any depth) holds NUL or a lone surrogate."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        field = f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]"
        for text, what in ((key, "key"), (item, "value")):
            if isinstance(text, str) and _NOT_ANYWHERE.search(text):
                raise ConfigError(
                    f"{field if what == 'value' else where}: a {what} holds a NUL or an unpaired "
                    "surrogate character, which no command line or file can carry",
                    field=where if what == "key" else field,
                    source=source,
                )
        _check_text(item, field, source)


def check_run_id(run_id: Any, source: str | None = None) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ConfigError(
            f"run_id must be 1-128 letters, digits, '-' or '_' (it becomes a directory name), got {run_id!r}",
            field="run_id",
            source=source,
        )
    return run_id


@dataclass(frozen=True)
class WorkerConfig:
    """A validated worker config. ``source`` names the file it came from (for messages)."""

    run_id: str
    algo: str
    env_id: str
    total_timesteps: int | None
    seed: int | None = None
    worker_id: str | None = None  # the training program's name to the daemon (RegisterWorker.worker_id)
    extras: dict[str, Any] = field(default_factory=dict)
    source: str | None = field(default=None, compare=False)
    # The whole payload as loaded (a flat config, or the trainer payload around it), for debugging:
    # in memory only (never in to_dict, config.json or events), and not part of equality.
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        src = self.source
        check_run_id(self.run_id, src)
        for name in ("algo", "env_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}", field=name, source=src)
            _check_name(name, value, src)
        total = self.total_timesteps
        if total is None and not needs_budget(self.extras):
            pass  # resume takes the resumed run's budget; evaluate needs none (docs/run-contract.md)
        elif isinstance(total, bool) or not isinstance(total, int) or total <= 0:
            raise ConfigError(
                f"total_timesteps must be an integer > 0, got {total!r}", field="total_timesteps", source=src
            )
        if total is not None and total > MAX_STEPS:
            raise ConfigError(
                f"total_timesteps must be at most {MAX_STEPS} (int64), got {total}", field="total_timesteps", source=src
            )
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
            raise ConfigError(
                f"seed must be an integer from 0 to {MAX_SEED} (numpy's seeding range) or null, got {seed!r}",
                field="seed",
                source=src,
            )
        if self.worker_id is not None and not isinstance(self.worker_id, str):
            raise ConfigError(
                f"worker_id must be a string or null, got {self.worker_id!r}", field="worker_id", source=src
            )
        if self.worker_id is not None:
            _check_name("worker_id", self.worker_id, src)
        if not isinstance(self.extras, dict):
            raise ConfigError(f"extras must be an object, got {type(self.extras).__name__}", field="extras", source=src)
        _check_text(self.extras, "extras", src)
        agent_id = self.extras.get("agent_id")
        if agent_id is not None:
            if not isinstance(agent_id, str) or not agent_id.strip():
                raise ConfigError(
                    f"agent_id must be a non-empty string, got {agent_id!r}", field="extras.agent_id", source=src
                )
            _check_name("extras.agent_id", agent_id, src)

    def with_overrides(
        self,
        *,
        algo: str | None = None,
        env_id: str | None = None,
        total_timesteps: int | None = None,
        seed: int | None = None,
        worker_id: str | None = None,
        extras: dict[str, Any] | None = None,
    ) -> WorkerConfig:
        """A copy with the given fields replaced (None means "not given"), validated again;
        ``extras`` is merged into the current extras, the override winning per key (MOSAIC's
        semantics). ``raw`` stays the payload the config was loaded from."""
        given: dict[str, Any] = {
            name: value
            for name, value in (
                ("algo", algo),
                ("env_id", env_id),
                ("total_timesteps", total_timesteps),
                ("seed", seed),
                ("worker_id", worker_id),
            )
            if value is not None
        }
        if extras is not None:
            if not isinstance(extras, dict):
                raise ConfigError(f"extras must be an object, got {type(extras).__name__}", field="extras")
            given["extras"] = {**self.extras, **extras}
        return replace(self, **given)

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> WorkerConfig:
        """A validated config from a flat mapping or a trainer payload (``metadata.worker.config``)."""
        return build_config(unwrap_config(data, source), source=source, raw=data)

    def to_dict(self, redacted: bool = True) -> dict[str, Any]:
        """The config's fields (what ``config.json`` records); ``source`` and ``raw`` are not among them."""
        data = {name: copy.deepcopy(getattr(self, name)) for name in FIELDS}
        return redact(data) if redacted else data


def run_metadata(config: WorkerConfig) -> dict[str, Any]:
    """What a run records about itself beside its config (``run_started``, the manifest): MOSAIC's
    ``agent_id``, when the config gives one (``extras.agent_id``; never a script flag)."""
    agent_id = config.extras.get("agent_id")
    return {"agent_id": agent_id} if agent_id else {}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def depth(value: Any) -> int:
    """How deep ``value`` nests (counted up to one past :data:`MAX_DEPTH`, never recursing)."""
    levels, level = 0, [value]
    while level:
        levels += 1
        if levels > MAX_DEPTH:
            return levels
        level = [
            v
            for item in level
            for v in (item.values() if isinstance(item, dict) else item if isinstance(item, list) else ())
        ]
    return levels


def parse_json(text: str, what: str, source: str | None = None, field: str | None = None) -> Any:
    """Strict JSON: no NaN/Infinity, no duplicate keys, at most :data:`MAX_DEPTH` levels;
    every problem is a ConfigError naming ``what`` (and the line and column when known)."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", field=field, source=source
        ) from None
    except ValueError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}", field=field, source=source) from None
    except RecursionError:
        raise ConfigError(f"{what} nests deeper than {MAX_DEPTH} levels", field=field, source=source) from None
    if depth(value) > MAX_DEPTH:
        raise ConfigError(f"{what} nests deeper than {MAX_DEPTH} levels", field=field, source=source)
    return value


MAX_CONFIG_FILE_BYTES = 16 * 1024 * 1024
MAX_SPEC_BYTES = 1024 * 1024  # an experiment or sweep spec: a few kilobytes


def read_spec_text(path: str | Path, what: str) -> str:
    """The text of a spec file the user named (``what``: "experiment spec"…): a regular file,
    opened without blocking and checked before it is read (a FIFO or device is refused, never
    waited on; a link is followed and the file may be anyone's), at most :data:`MAX_SPEC_BYTES`,
    UTF-8 without NUL. Anything else is one UsageError naming ``what`` and the file."""
    from mosaic_core.errors import UsageError
    from mosaic_core.files import open_private

    shown = repr(str(path)) if "\0" in str(path) else str(path)
    try:
        with open_private(path, any_owner=True) as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except ValueError:  # a NUL in the path
        raise UsageError(f"{what} {shown}: a file name cannot hold a NUL byte") from None
    except FileNotFoundError:
        raise UsageError(f"{what} {shown} does not exist") from None
    except OSError as exc:
        raise UsageError(f"{what} {shown}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise UsageError(f"{what} {shown}: larger than {MAX_SPEC_BYTES // 1024} KiB; a spec is a few lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {shown}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    if "\0" in text:
        raise UsageError(f"{what} {shown}: holds a NUL byte (at character {text.index(chr(0))}); not a text file")
    return text


class ConfigFile(dict[str, Any]):
    """A config file's worker config (the file itself, or its ``metadata.worker.config``);
    ``raw`` is the whole payload the file held (it becomes :attr:`WorkerConfig.raw`)."""

    def __init__(self, config: dict[str, Any], raw: Any):
        super().__init__(config)
        self.raw = raw


def raw_payload(data: Any) -> Any:
    """The whole payload ``data`` was read from (a :class:`ConfigFile`'s), else ``data`` itself."""
    return data.raw if isinstance(data, ConfigFile) else data


def read_config_file(path: str | Path, run_file: bool = False) -> ConfigFile:
    """The worker-config object from a flat or nested (trainer payload) JSON file, at most
    :data:`MAX_CONFIG_FILE_BYTES`. A file the user named may be a pipe of theirs (``--config
    <(…)``), read once; a device, or a FIFO someone else made, is refused, never waited on.
    ``run_file`` (a run's ``config.json``, where others may have planted one) refuses every
    FIFO, a link and a file that is not ours (:func:`mosaic_core.files.open_private`)."""
    from mosaic_core.files import UntrustedPath, open_private

    source = str(path)
    try:
        with open_private(path, any_owner=not run_file, own_pipe=not run_file) as handle:
            raw = handle.read(MAX_CONFIG_FILE_BYTES + 1)
        if len(raw) > MAX_CONFIG_FILE_BYTES:
            raise ConfigError(f"config file is larger than {MAX_CONFIG_FILE_BYTES // 2**20} MiB", source=source)
    except FileNotFoundError:
        raise ConfigError("config file not found", source=source) from None
    except UntrustedPath as exc:
        raise ConfigError(f"refused: {exc}", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", source=source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file is not UTF-8 text (byte {exc.start} cannot be decoded)", source=source
        ) from None
    payload = parse_json(text, "the config file", source)
    return ConfigFile(unwrap_config(payload, source), payload)


def unwrap_config(data: Any, source: str | None = None) -> dict[str, Any]:
    """The worker config in ``data``: ``data`` itself (flat), or a trainer payload's
    ``metadata.worker.config`` (nested; what it holds besides is said in one line, see
    :func:`note_daemon_fields`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"a worker config must be a JSON object, got {type(data).__name__}", source=source)
    nested = data.get("metadata")
    if isinstance(nested, dict) and "worker" in nested:
        worker = nested["worker"]
        config = worker.get("config") if isinstance(worker, dict) else None
        if not isinstance(config, dict):
            raise ConfigError("metadata.worker.config must be an object", field="metadata.worker.config", source=source)
        note_daemon_fields(data, source)
        return dict(config)
    return dict(data)


def note_daemon_fields(payload: dict[str, Any], source: str | None) -> None:
    """One line on stderr when a trainer payload read as a worker config carries what only the
    trainer daemon applies (``environment``, ``metadata.worker.arguments``): MOSAIC's worker
    ignored them too; ``mosaic submit FILE`` applies them."""
    import sys

    worker = payload["metadata"]["worker"]
    found = [
        name
        for name, value in (
            ("environment", payload.get("environment")),
            ("metadata.worker.arguments", worker.get("arguments")),
        )
        if value
    ]
    if found:
        print(
            f"mosaic: note: {source or 'the config'} is a trainer payload: this command runs its "
            f"metadata.worker.config; its {' and '.join(found)} are the trainer daemon's to apply "
            "(mosaic submit applies them) and are not applied here",
            file=sys.stderr,
        )


def build_config(
    data: dict[str, Any] | None = None,
    *,
    source: str | None = None,
    overrides: dict[str, Any] | None = None,
    extras: dict[str, Any] | None = None,
    generate_run_id: bool = False,
    defaults: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    extras_key: Callable[[str], bool] | None = None,
    raw: Any = None,
) -> WorkerConfig:
    """Merge file data, CLI overrides (win) and ``--extras`` (merged per key), then validate.

    ``extras_key`` (whether someone claims an extras key of that name) reads a flat config in
    MOSAIC's shape (:func:`place_loose_keys`); without it a key outside the schema is an error.
    ``defaults`` (e.g. :meth:`PluginHost.config_defaults`) fills fields still missing; an
    ``"extras"`` object among them fills extras keys still missing. ``raw``: the payload ``data``
    came from (:attr:`WorkerConfig.raw`; default ``data`` as given)."""
    raw = dict(data or {}) if raw is None else raw
    merged = dict(data or {})
    _rename_program_id(merged, source)
    _rename_algorithm(merged, source)
    loose = {key: merged.pop(key) for key in list(merged) if key not in FIELDS} if extras_key else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            merged[key] = value
    file_extras = merged.get("extras", {})
    if file_extras is None:
        file_extras = {}
    if not isinstance(file_extras, dict):
        raise ConfigError(f"extras must be an object, got {type(file_extras).__name__}", field="extras", source=source)
    merged["extras"] = {**file_extras, **(extras or {})}
    if extras_key is not None:
        place_loose_keys(loose, merged["extras"], file_extras, extras_key, source)
    if defaults is not None:
        _apply_defaults(merged, defaults(merged))
    if generate_run_id and not merged.get("run_id"):
        merged["run_id"] = new_run_id()
    _check_fields(merged, source)
    if merged.get("total_timesteps") in (None, ""):
        merged["total_timesteps"] = None
    return WorkerConfig(**merged, source=source, raw=raw if isinstance(raw, dict) else {})


def _apply_defaults(merged: dict[str, Any], found: dict[str, Any]) -> None:
    """Fill fields still missing from ``found``; its ``"extras"`` fills extras keys left out (the user's win)."""
    found = dict(found)
    extras_defaults = found.pop("extras", None)
    if isinstance(extras_defaults, dict):
        merged["extras"] = {**extras_defaults, **merged["extras"]}
    merged.update({k: v for k, v in found.items() if merged.get(k) in (None, "")})


def _check_fields(merged: dict[str, Any], source: str | None) -> None:
    """A ConfigError for a field outside the schema or a required one missing (flags named when
    the config came from the command line); ``extras.mode`` read once, in the contract's names."""
    unknown = sorted(set(merged) - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(FIELDS))}",
            field=unknown[0],
            source=source,
        )
    if "mode" in merged["extras"]:  # read once, here: workers only ever see the contract's names
        from mosaic_core.contract import normalize_mode

        merged["extras"]["mode"] = normalize_mode(merged["extras"]["mode"])
    required = REQUIRED if needs_budget(merged["extras"]) else tuple(n for n in REQUIRED if n != "total_timesteps")
    missing = [name for name in required if merged.get(name) in (None, "")]
    if missing:
        flags = (
            ""
            if source
            else "; give "
            + ", ".join(
                "--env-id (or --env)" if name == "env_id" else f"--{name.replace('_', '-')}" for name in missing
            )
        )
        raise ConfigError(f"missing required field(s) {', '.join(missing)}{flags}", field=missing[0], source=source)


HYPERPARAMETERS = "algo_params"  # the extras key every worker reads its algorithm's own settings from


def place_loose_keys(
    loose: dict[str, Any],
    extras: dict[str, Any],
    file_extras: dict[str, Any],
    extras_key: Callable[[str], bool],
    source: str | None,
) -> None:
    """A flat config in MOSAIC's shape (``{"algorithm": "ppo", "learning_rate": 3e-4, …}``): a
    top-level key outside the schema is an extras key when someone claims one of that name
    (``mode``, ``track_wandb``, ``agent_id``…), else a hyperparameter of the algorithm, in
    ``extras.algo_params`` (checked there like any other). ``extras`` (the file's and
    ``--extras`` merged) is completed in place; ``file_extras`` is the file's own."""
    _fill(extras, {k: v for k, v in loose.items() if extras_key(k)}, file_extras, "extras", source)
    hyperparameters = {k: v for k, v in loose.items() if not extras_key(k)}
    if not hyperparameters:
        return
    params = extras.get(HYPERPARAMETERS) or {}
    if not isinstance(params, dict):
        where = f"extras.{HYPERPARAMETERS}"
        raise ConfigError(f"{where} must be an object, got {type(params).__name__}", field=where, source=source)
    file_params = file_extras.get(HYPERPARAMETERS)
    extras[HYPERPARAMETERS] = params = dict(params)
    _fill(
        params,
        hyperparameters,
        file_params if isinstance(file_params, dict) else {},
        f"extras.{HYPERPARAMETERS}",
        source,
    )


def _fill(
    target: dict[str, Any], values: dict[str, Any], in_file: dict[str, Any], where: str, source: str | None
) -> None:
    """``values`` into ``target`` where it has none of its own (``--extras`` wins); a key the file
    also gives at ``where`` must have the same value there."""
    for key, value in values.items():
        if key in in_file and in_file[key] != value:
            raise ConfigError(
                f"{key} is given at the top level ({value!r}) and as {where}.{key} ({in_file[key]!r}); give it once",
                field=key,
                source=source,
            )
        target.setdefault(key, value)


def _rename_algorithm(data: dict[str, Any], source: str | None) -> None:
    """``algorithm``, MOSAIC's spelling of ``algo`` in flat configs: read as ``algo``."""
    if "algorithm" not in data:
        return
    algorithm = data.pop("algorithm")
    if data.get("algo") not in (None, "", algorithm):
        raise ConfigError(
            f"algorithm {algorithm!r} and algo {data['algo']!r} disagree (algorithm is MOSAIC's name "
            "for algo); give one",
            field="algorithm",
            source=source,
        )
    data["algo"] = algorithm


def _rename_program_id(data: dict[str, Any], source: str | None) -> None:
    """``program_id``, the name ``worker_id`` had for a while (a config written then, a run
    recorded then): read as ``worker_id`` (MOSAIC's name, which wins), said when it holds a value."""
    if "program_id" not in data:
        return
    old = data.pop("program_id")
    if old is not None:
        from mosaic_core.renamed import say_renamed

        say_renamed("program_id", "worker_id", source or "the config")
        if data.get("worker_id") is None:
            data["worker_id"] = old


def needs_budget(extras: Any) -> bool:
    """Whether a config's mode needs ``total_timesteps``: ``train`` (the default) and any mode a
    worker adds do; ``resume`` (the resumed run's budget) and ``evaluate`` do not."""
    from mosaic_core.contract import normalize_mode

    mode = normalize_mode(extras.get("mode")) if isinstance(extras, dict) else "train"
    return mode not in ("resume", "evaluate")


def parse_extras_json(text: str) -> dict[str, Any]:
    """Parse ``--extras``: a JSON object (strict, see :func:`parse_json`)."""
    value = parse_json(text, "--extras", field="extras")
    if not isinstance(value, dict):
        raise ConfigError(f"--extras must be a JSON object, got {type(value).__name__}", field="extras")
    return value
