"""MOSAIC host: discovers workers and plugins, validates configs, runs and supervises jobs.

What a plugin or worker author needs is importable from here, lazily (``import mosaic_core``
imports nothing else)::

    from mosaic_core import hookimpl, ExtrasKey, ChildEvent, Launch, Worker, WorkerMetadata
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it (imported on first use).
_EXPORTS = {
    "hookimpl": "mosaic_core.hookspecs",
    "Worker": "mosaic_core.worker",
    "WorkerMetadata": "mosaic_core.capabilities",
    "WorkerCapabilities": "mosaic_core.capabilities",
    "WorkerEnvironment": "mosaic_core.capabilities",
    "CliCommand": "mosaic_core.cli.commands",
    **{name: "mosaic_core.types" for name in (
        "ExtrasKey", "ChildEvent", "CodePath", "Launch", "FrameInfo", "ChildContext", "HookFailure",
        "TrackingSettings", "FormOption", "WorkerForm")},
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mosaic_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
