"""Scripted operators for ``mosaic match`` (the ``mosaic.operators`` entry points in pyproject.toml): plain
functions ``(observation, info) -> action`` that a seat spec names, ``scripted:first-legal``."""

from __future__ import annotations

from typing import Any


def _mask(observation: Any, info: dict[str, Any]) -> Any:
    if isinstance(observation, dict) and "action_mask" in observation:
        return observation["action_mask"]
    return info["action_mask"]


def first_legal(observation: Any, info: dict[str, Any]) -> int:
    """The lowest-numbered legal action (a board game's first free square)."""
    return int(list(_mask(observation, info)).index(1))


def always_zero(observation: Any, info: dict[str, Any]) -> int:
    """Action 0 every turn, legal or not: in Tic-Tac-Toe its second move is illegal (a forfeit)."""
    return 0
