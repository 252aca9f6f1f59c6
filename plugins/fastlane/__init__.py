"""MOSAIC FastLane: live frames and metrics of a training run over shared memory.

Readers use :class:`FastLaneReader` (``from mosaic_fastlane import FastLaneReader``); the
hooks are in :mod:`mosaic_fastlane.plugin`, the byte layout in :mod:`mosaic_fastlane.layout`.
Names below are imported on first use, so loading the plugin stays cheap.
"""

from typing import Any

_EXPORTS = {
    "FastLaneReader": "mosaic_fastlane.reader",
    "Frame": "mosaic_fastlane.reader",
    "FastLaneError": "mosaic_fastlane.segment",
    "SharedMemoryUnavailable": "mosaic_fastlane.segment",
    "PixelFormat": "mosaic_fastlane.layout",
    "segment_name": "mosaic_fastlane.layout",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mosaic_fastlane' has no attribute {name!r}")
