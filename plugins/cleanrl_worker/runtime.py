"""MOSAIC's documented runtime (``cleanrl_worker.runtime``): ``CleanRLWorkerRuntime`` and
``RuntimeSummary``, a thin layer over the host's one pipeline (:mod:`mosaic_core.pipeline`):
the same config checks, plan, supervision, events and manifest as ``mosaic run``.

``DEFAULT_ALGO_REGISTRY`` maps algorithm names to their canonical module as MOSAIC's does
(``cleanrl.dqn``…; ``ppo`` to ``cleanrl_worker.algorithms.ppo``).
With it, names resolve the way ``--algo`` does (an installed or checked-out CleanRL first, then
the bundled copy in ``cleanrl_worker.algorithms``), with a clear error naming what is missing;
a registry of your own maps names to any importable module, run as the algorithm script.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cleanrl_worker.readiness import MOSAIC_MODULES
from cleanrl_worker.registry import bundled_names, defines_main, entrypoint_of, resolve
from mosaic_core import DEFAULT_GRPC_TARGET, Prepared, UsageError, WorkerConfig, WorkerRuntime

__all__ = ["CleanRLWorkerRuntime", "RuntimeSummary", "DEFAULT_ALGO_REGISTRY"]
# MOSAIC's table (ppo -> its own copy, the rest -> upstream's module), then our bundled extras.
DEFAULT_ALGO_REGISTRY: Mapping[str, str] = MappingProxyType(
    {**MOSAIC_MODULES, **{name: f"cleanrl.{name}" for name in bundled_names() if name not in MOSAIC_MODULES}}
)


@dataclass(frozen=True)
class RuntimeSummary:
    status: str  # "dry-run", "completed", "failed" or "cancelled"
    module: str
    callable: str
    config: dict[str, Any]
    extras: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CleanRLWorkerRuntime(WorkerRuntime):
    worker = "cleanrl"

    def __init__(
        self,
        config: WorkerConfig,
        *,
        use_grpc: bool = False,
        grpc_target: str = DEFAULT_GRPC_TARGET,
        dry_run: bool = False,
        algo_registry: Mapping[str, str] = DEFAULT_ALGO_REGISTRY,
        runs_dir: str | Path | None = None,
        quiet: bool = True,
    ):
        super().__init__(
            config, use_grpc=use_grpc, grpc_target=grpc_target, dry_run=dry_run, runs_dir=runs_dir, quiet=quiet
        )
        self.algo_registry = algo_registry

    # -------------------------------------------------------------- resolution
    def _custom_script(self) -> Path | None:
        """The module file of the algorithm in a registry of the caller's own (None: default)."""
        if self.algo_registry is DEFAULT_ALGO_REGISTRY:
            return None
        module = self.algo_registry.get(self.config.algo)
        if module is None:
            raise UsageError(
                f"algorithm {self.config.algo!r} is not in the registry; known: "
                f"{', '.join(sorted(self.algo_registry)) or 'none'}"
            )
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise UsageError(f"algorithm {self.config.algo!r}: module {module} is not importable from a .py file")
        return Path(spec.origin)

    def resolve_entrypoint(self) -> tuple[str, str]:
        """``(module, "module.main")`` of the algorithm that runs (``module:__main__`` when the
        module has no ``main()``: CleanRL scripts run as ``__main__``)."""
        script = self._custom_script()
        if script is not None:
            module = self.algo_registry[self.config.algo]
            return module, f"{module}.main" if defines_main(script) else f"{module}:__main__"
        return entrypoint_of(resolve(self.config.algo, cleanrl_home=self.config.extras.get("cleanrl_home")))

    # -------------------------------------------------------------- the pipeline
    def config_data(self) -> dict[str, Any]:
        """The config, with a registry's algorithm given as its script's path."""
        data = super().config_data()
        script = self._custom_script()
        if script is not None:
            data["algo"] = str(script)
        return data

    def build_cleanrl_args(self) -> list[str]:
        """The algorithm script's argv, as the run will get it."""
        return list(self.prepare().launch.summary.get("argv", []))

    def summary(self, status: str, prepared: Prepared) -> dict[str, Any]:
        """MOSAIC's five fields."""
        module, function = self.resolve_entrypoint()
        config = prepared.config.to_dict()
        return RuntimeSummary(status, module, function, config, config["extras"]).to_dict()

    def run(self) -> dict[str, Any]:
        """Dry run (``status: "dry-run"``) or run under supervision, then MOSAIC's five fields."""
        self.prepare()
        self.resolve_entrypoint()  # an algorithm that cannot run is said before it starts
        return super().run()
