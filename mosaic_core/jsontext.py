"""Strict JSON out: every JSON MOSAIC emits (``--json`` output, the dashboard's API and streams,
the files it writes) goes through :func:`dumps`. A run's files may hold ``NaN`` or ``Infinity``
(Python's ``json`` reads them; an imported run's events can carry anything), which no JSON
parser outside Python accepts: they become ``null`` here, so one odd number never makes a
whole answer unreadable."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "dumps_row", "dumps_rows", "finite", "join_rows"]


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


def dumps_rows(values: list[Any]) -> str:
    """A JSON array of ``values``, one per line, each compact: what a listing of thousands of
    runs prints (json's C encoder; an indented dump of 10,000 runs costs more than reading them)."""
    return join_rows(list(map(dumps_row, values)))


def join_rows(rows: list[str]) -> str:
    """Rows already encoded (:func:`dumps_row`) as :func:`dumps_rows` prints them."""
    return "[\n" + ",\n".join(rows) + "\n]" if rows else "[]"


_STRICT = json.JSONEncoder(allow_nan=False)  # one encoder for every row (json.dumps makes one per call)


def dumps_row(value: Any) -> str:
    """One row of :func:`dumps_rows`: ``value`` as compact, strict JSON."""
    try:
        return _STRICT.encode(value)
    except ValueError:  # a NaN or infinity somewhere in it: walk it (rare)
        return dumps(value)
