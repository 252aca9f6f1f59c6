"""MOSAIC's documented ``build_manifest`` (``cleanrl_worker.analytics``): a run's manifests from its
extras (or config) and run directory, written by the same code as at the end of every run: the
plugins' ``mosaic_build_manifest`` sections under the host's header in ``manifest.json``, and what
the plugins derive from it (MOSAIC's ``analytics.json``).

MOSAIC's form, ``build_manifest(run_dir, extras={...})``, returns the ``analytics.json`` document
(an :class:`AnalyticsManifest`: a dict with MOSAIC's ``to_dict()``). Ours,
``build_manifest(run_dir, config[, status, worker])``, returns the ``manifest.json`` document. A bad
extras value (a path out of the run directory…) is a ConfigError naming it, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mosaic_core import STATUS_OF, ConfigError, RunContext, RunDirectory, WorkerConfig, record_run_end
from mosaic_core.files import read_private_text
from mosaic_core.toolkit import build_config, plugin_host

__all__ = ["AnalyticsManifest", "build_manifest"]

ANALYTICS_FILE = "analytics.json"  # MOSAIC's name, under the run directory


class AnalyticsManifest(dict[str, Any]):
    """MOSAIC's manifest object: the ``analytics.json`` document, as a dict."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def build_manifest(
    run_dir: str | Path,
    config: WorkerConfig | dict[str, Any] | None = None,
    status: str = "completed",
    worker: str = "cleanrl",
    *,
    extras: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Write ``<run_dir>/manifest.json`` and ``analytics.json``; return ``analytics.json`` when
    called MOSAIC's way (``extras=``, and MOSAIC's optional ``run_id=``: here a run's id is its
    directory's name), else ``manifest.json``. ``config`` is the run's config (or its mapping); a
    bare extras mapping is accepted too, for a run directory made elsewhere."""
    if (config is None) == (extras is None):
        raise TypeError("build_manifest(run_dir, extras={...}) or build_manifest(run_dir, config): give one")
    if status not in STATUS_OF.values():
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUS_OF.values())}")
    run_dir = Path(run_dir).absolute()
    if run_id is not None and run_id != run_dir.name:
        raise ConfigError(
            f"run_id {run_id!r} is not the run directory's name {run_dir.name!r} (MOSAIC recorded any "
            "run_id; here a run's id is its directory's name)",
            field="run_id",
        )
    if not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} does not exist", field="run_dir")
    config = _config(run_dir, config) if extras is None else _config(run_dir, {}, extras)
    run = RunContext(config=config, directory=RunDirectory(run_dir.parent, run_dir.name), worker=worker)
    host = plugin_host()
    problems = host.validate_config(run.config)
    if problems:
        raise ConfigError("; ".join(problems), source=str(run_dir))
    ended = record_run_end(run, host, status, {}, started=False)
    if ended.get("manifest_error"):
        raise OSError(f"cannot write {run.directory.manifest}: {ended['manifest_error']}")
    if extras is None:
        return json.loads(read_private_text(run.directory.manifest))
    try:
        return AnalyticsManifest(json.loads(read_private_text(run_dir / ANALYTICS_FILE)))
    except FileNotFoundError:
        raise ConfigError(
            f"no {ANALYTICS_FILE} was written in {run_dir}: the plugin that writes it is not loaded "
            "(see `mosaic plugins`)"
        ) from None


def _config(run_dir: Path, config: WorkerConfig | dict[str, Any], extras: dict[str, Any] | None = None) -> WorkerConfig:
    """The run's config: ``config``, or one for a run directory made elsewhere from its extras (a
    mapping without ``algo``, ``env_id`` and ``total_timesteps`` is taken for bare extras)."""
    if isinstance(config, WorkerConfig):
        return config
    data = dict(config)
    if extras is not None or not {"algo", "env_id", "total_timesteps"} & set(data):
        data = {"algo": "unknown", "env_id": "unknown", "total_timesteps": 1, "extras": dict(extras or data)}
    return build_config({"run_id": run_dir.name, **data})
