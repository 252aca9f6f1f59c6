"""Strict JSON out: every JSON MOSAIC emits (``--json`` output, the dashboard's API and streams,
the files it writes) goes through :func:`dumps`. A run's files may hold ``NaN`` or ``Infinity``
(Python's ``json`` reads them; an imported run's events can carry anything), which no JSON
parser outside Python accepts: they become ``null`` here, so one odd number never makes a
whole answer unreadable."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "finite"]


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (dicts, lists and tuples walked)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` as strict JSON: non-finite numbers are ``null``."""
    return json.dumps(finite(value), allow_nan=False, **options)
