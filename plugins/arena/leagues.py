"""The leagues under a runs root, read back: each ``league-NAME.json`` as ``mosaic league`` wrote it
(the dashboard's League page reads them through the arena's ``mosaic_league_standings``). Data only:
bounded in size, read without following a link, nothing in it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mosaic_arena.league import LEAGUE_SCHEMA

__all__ = ["leagues_under", "read_standings"]

MAX_STANDINGS_BYTES = 16 << 20
MAX_LEAGUES = 200


def read_standings(path: Path) -> dict[str, Any] | None:
    """A league's standings file, or None when it is missing, damaged, too big, a link, another
    user's or of another schema."""
    from mosaic_core.files import open_private

    try:
        with open_private(path) as handle:
            text = handle.read(MAX_STANDINGS_BYTES + 1)
        data = json.loads(text) if len(text) <= MAX_STANDINGS_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != LEAGUE_SCHEMA:
        return None
    if not all(isinstance(data.get(key), dict) for key in ("ratings", "cross_play", "operators")):
        return None
    if not isinstance(data.get("matches", []), list):
        return None
    return data


def leagues_under(root: Path) -> list[dict[str, Any]]:
    """The standings of every league under the runs root ``root``, by name (unreadable ones left out)."""
    try:
        paths = sorted(root.glob("league-*.json"))[:MAX_LEAGUES]
    except OSError:
        return []
    return [found for path in paths if (found := read_standings(path)) is not None]
