"""What a worker can do (``WorkerCapabilities``) and who it is (``WorkerMetadata``).

Both are frozen dataclasses validated on construction, with a JSON round-trip
(``to_dict``/``from_dict``) so a daemon or GUI can exchange them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

PARADIGMS = frozenset({"sequential", "parallel", "self_play", "population", "hierarchical"})
ACTION_SPACES = frozenset({"discrete", "continuous", "multi_discrete", "multi_binary", "hybrid"})
OBSERVATION_SPACES = frozenset({"vector", "image", "dict", "text", "graph"})
_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")


def _tuple_of_str(owner: str, name: str, value: Any, allowed: frozenset[str] | None = None) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{owner}.{name} must be a list of strings, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{owner}.{name} must hold non-empty strings, got {item!r}")
        if allowed is not None and item not in allowed:
            raise ValueError(f"{owner}.{name}: {item!r} is not one of {', '.join(sorted(allowed))}")
    if not items:
        raise ValueError(f"{owner}.{name} must not be empty")
    return items


def _check_int(owner: str, name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")


def _check_bool(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{owner}.{name} must be true or false, got {value!r}")


_D = TypeVar("_D", bound="DataclassInstance")


def _from_dict(cls: type[_D], data: Any) -> _D:
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    return cls(**data)


@dataclass(frozen=True, kw_only=True)
class WorkerCapabilities:
    """The contract a worker declares; the host and daemon schedule runs against it.
    ``worker_type`` defaults to the worker's name (several workers may share one type)."""

    worker_type: str = ""
    supported_paradigms: tuple[str, ...]
    env_families: tuple[str, ...]
    action_spaces: tuple[str, ...]
    observation_spaces: tuple[str, ...]
    max_agents: int = 1
    supports_self_play: bool = False
    supports_population: bool = False
    supports_checkpointing: bool = False
    supports_pause_resume: bool = False
    # Envs switched during a run (a curriculum's stages): envs made through gymnasium.make switch
    # through the patch point; a worker whose envs are built once, out of its reach, says False.
    supports_env_switching: bool = True
    requires_gpu: bool = False
    gpu_memory_mb: int = 0
    cpu_cores: int = 1
    estimated_memory_mb: int = 512

    def __post_init__(self) -> None:
        owner = "WorkerCapabilities"
        if not isinstance(self.worker_type, str) or (self.worker_type and not _NAME.match(self.worker_type)):
            raise ValueError(f"{owner}.worker_type must be a lower-case identifier, got {self.worker_type!r}")
        set_ = object.__setattr__
        set_(
            self,
            "supported_paradigms",
            _tuple_of_str(owner, "supported_paradigms", self.supported_paradigms, PARADIGMS),
        )
        set_(self, "env_families", _tuple_of_str(owner, "env_families", self.env_families))
        set_(self, "action_spaces", _tuple_of_str(owner, "action_spaces", self.action_spaces, ACTION_SPACES))
        set_(
            self,
            "observation_spaces",
            _tuple_of_str(owner, "observation_spaces", self.observation_spaces, OBSERVATION_SPACES),
        )
        _check_int(owner, "max_agents", self.max_agents, 1)
        _check_int(owner, "gpu_memory_mb", self.gpu_memory_mb, 0)
        _check_int(owner, "cpu_cores", self.cpu_cores, 1)
        _check_int(owner, "estimated_memory_mb", self.estimated_memory_mb, 0)
        for name in (
            "supports_self_play",
            "supports_population",
            "supports_checkpointing",
            "supports_pause_resume",
            "supports_env_switching",
            "requires_gpu",
        ):
            _check_bool(owner, name, getattr(self, name))
        if self.gpu_memory_mb and not self.requires_gpu:
            raise ValueError(f"{owner}.gpu_memory_mb is set but requires_gpu is false")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Any) -> WorkerCapabilities:
        return _from_dict(cls, data)


_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*(\[[A-Za-z0-9_,\-]+\])?\s*([<>=!~;@ ].*)?$")


def _requirements(owner: str, name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{owner}.{name} must be a list of pip requirement strings, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not _REQUIREMENT.match(item) or item.startswith("-") or "\n" in item:
            raise ValueError(f"{owner}.{name}: {item!r} is not a pip requirement (name[extras] and a version spec)")
    return tuple(value)


@dataclass(frozen=True)
class WorkerEnvironment:
    """A worker's own Python environment (MOSAIC's "dependency bundle"): for a worker whose
    dependencies conflict with the host's or another worker's (RLlib pins gymnasium 1.2.2,
    XuanCe brings ``opencv-python``). ``mosaic workers install NAME`` builds it from package
    registries; its runs' training processes execute there, the host stays in its own venv.

    ``requirements`` are pip requirement strings, pinned where it matters (pre-flight checks
    every ``==`` pin before a run starts); ``host_extras`` are extras of the host's distribution
    (``mosaic-rl``) to install with it (the host's core and the plugins are always there,
    so the training process imports ``mosaic_core`` and the plugins as in the host);
    ``optional`` maps names to more requirements ``mosaic workers install NAME --extras a,b``
    adds (e.g. env families)."""

    requirements: tuple[str, ...]
    host_extras: tuple[str, ...] = ()
    optional: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        owner = "WorkerEnvironment"
        object.__setattr__(self, "requirements", _requirements(owner, "requirements", self.requirements))
        extras = self.host_extras
        if (
            isinstance(extras, str)
            or not isinstance(extras, (list, tuple))
            or not all(isinstance(e, str) and _NAME.match(e) for e in extras)
        ):
            raise ValueError(f"{owner}.host_extras must be a list of extra names, got {extras!r}")
        object.__setattr__(self, "host_extras", tuple(extras))
        if not isinstance(self.optional, dict) or not all(isinstance(k, str) and _NAME.match(k) for k in self.optional):
            raise ValueError(f"{owner}.optional must map extra names to requirement lists, got {self.optional!r}")
        object.__setattr__(
            self, "optional", {k: _requirements(owner, f"optional[{k!r}]", v) for k, v in sorted(self.optional.items())}
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requirements": list(self.requirements),
            "host_extras": list(self.host_extras),
            "optional": {k: list(v) for k, v in self.optional.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> WorkerEnvironment:
        return _from_dict(cls, data)


@dataclass(frozen=True, kw_only=True)
class WorkerMetadata:
    """Who a worker is, what it wraps, and how the host runs it: the one descriptor a plugin's
    ``mosaic_workers`` hook returns for it (``name`` given there; a deprecated ``mosaic.workers``
    entry point may leave it out: its entry point's name fills it in). ``capabilities.worker_type``
    may be left out (then the name).

    ``worker`` is a ``module:attribute`` naming the worker interface (a class with a no-argument
    constructor, or an object; see :class:`mosaic_core.worker.Worker`). The host imports it
    only when it runs or checks a job, so discovery stays import-light. ``run_hooks`` (optional):
    a module (``package.module``) of hook implementations the host registers for this worker's
    runs only (the hooks taking ``run`` or ``child``: :data:`mosaic_core.hookspecs.PER_RUN`),
    imported when a run of this worker starts. ``environment``
    (optional) gives the worker its own Python environment (:class:`WorkerEnvironment`).
    ``example``: a worker that shows how to write one (or a test fixture): listed and run by
    name, never chosen for a run that names no worker (:func:`mosaic_core.workers.default_worker`).
    """

    version: str
    description: str
    capabilities: WorkerCapabilities
    worker: str
    name: str = ""
    upstream_library: str | None = None
    upstream_version: str | None = None
    environment: WorkerEnvironment | None = None
    example: bool = False
    run_hooks: str | None = None

    def __post_init__(self) -> None:
        owner = "WorkerMetadata"
        if not isinstance(self.example, bool):
            raise ValueError(f"{owner}.example must be true or false, got {self.example!r}")
        if self.environment is not None and not isinstance(self.environment, WorkerEnvironment):
            raise ValueError(
                f"{owner}.environment must be WorkerEnvironment or None, got {type(self.environment).__name__}"
            )
        if not isinstance(self.name, str) or (self.name and not _NAME.match(self.name)):
            raise ValueError(f"{owner}.name must be a lower-case identifier, got {self.name!r}")
        for name in ("version", "description"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{owner}.{name} must be a non-empty string")
        if not isinstance(self.capabilities, WorkerCapabilities):
            raise ValueError(f"{owner}.capabilities must be WorkerCapabilities, got {type(self.capabilities).__name__}")
        if self.name and not self.capabilities.worker_type:
            object.__setattr__(self, "capabilities", replace(self.capabilities, worker_type=self.name))
        if not isinstance(self.worker, str) or not re.match(r"^[\w.]+:[\w.]+$", self.worker):
            raise ValueError(f"{owner}.worker must look like 'package.module:Worker', got {self.worker!r}")
        if self.run_hooks is not None and (
            not isinstance(self.run_hooks, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", self.run_hooks)
        ):
            raise ValueError(f"{owner}.run_hooks must name a module ('package.module'), got {self.run_hooks!r}")
        for name in ("upstream_library", "upstream_version"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{owner}.{name} must be a string or null")

    def named(self, name: str) -> WorkerMetadata:
        """This descriptor with the worker's name (its entry point's) filled in."""
        return self if self.name == name else replace(self, name=name)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["capabilities"] = self.capabilities.to_dict()
        data["environment"] = self.environment.to_dict() if self.environment else None
        return data

    @classmethod
    def from_dict(cls, data: Any) -> WorkerMetadata:
        if isinstance(data, dict) and isinstance(data.get("capabilities"), dict):
            data = {**data, "capabilities": WorkerCapabilities.from_dict(data["capabilities"])}
        if isinstance(data, dict) and isinstance(data.get("environment"), dict):
            data = {**data, "environment": WorkerEnvironment.from_dict(data["environment"])}
        return _from_dict(cls, data)
