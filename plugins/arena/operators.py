"""The operator protocol: whatever takes a seat in a match (a trained policy, a script, ``random``).

This module is the arena's public surface for third parties (it imports nothing heavy):

- :class:`Operator`, the three calls a seat makes: ``reset(seed)`` at the start of each episode,
  ``act(observation, info)`` for each of its turns, ``close()`` once at the end;
- :class:`Seat`, what an operator is built for (the game, the agent, its spaces);
- :class:`OperatorInfo`, the descriptor a plugin returns from ``mosaic_operators`` (the one way
  an operator kind is registered): its ``name`` is what a seat spec starts with (``random``,
  ``scripted:...``, ``run:...``), its ``factory(argument, seat)`` builds one operator;
- :class:`OperatorError`, a spec that cannot be seated (one line for the user, exit 2);
- :class:`SeatLeft`, raised by ``act`` when whoever decides is gone (a person left the page or let
  the time run out): the game is that seat's forfeit and the match ends cancelled.

A third party's scripted operator needs none of this: a function ``(observation, info) -> action``
declared in the ``mosaic.operators`` entry-point group is seated as ``scripted:NAME``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["KINDS", "Operator", "OperatorError", "OperatorInfo", "Seat", "SeatLeft"]

KINDS = ("random", "scripted", "policy", "human")  # what decides an operator's actions


class OperatorError(Exception):
    """An operator spec that cannot take its seat: what, and what to do (exit 2, nothing started)."""


class SeatLeft(Exception):
    """Whoever decides for a seat is gone mid-game (the message says who and why): the game is that
    seat's forfeit, and the match stops there, cancelled."""


@runtime_checkable
class Operator(Protocol):
    """One seat's decision-maker for a whole match."""

    def reset(self, seed: int) -> None:
        """A new episode starts; ``seed`` is this seat's recorded seed for it."""

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """The action for ``observation`` (the seat's own, as the env gives it; ``info`` carries
        ``action_mask`` when the env has one)."""

    def close(self) -> None:
        """The match is over (or cancelled): release processes and files."""


@dataclass(frozen=True)
class Seat:
    """A seat of a game: its agent name and spaces (gymnasium spaces), whether the game takes turns
    (an AEC env) or moves all seats at once (a parallel env), the runs root a match reads
    recorded runs from (``run:RUN_ID``), the match's own folder (where a ``human`` seat exchanges
    its moves with the dashboard; None outside a match) and the seconds a person has per move."""

    game: str
    agent: str
    observation_space: Any
    action_space: Any
    turn_based: bool
    runs_root: Path | None = None
    match_dir: Path | None = None
    human_timeout_s: float | None = None


@dataclass(frozen=True)
class OperatorInfo:
    """An operator kind as a plugin registers it (``mosaic_operators``).

    ``name``: the spec's first word (``random``; ``run`` in ``run:RUN_ID``); ``kind``: one of
    :data:`KINDS`; ``summary``: one line for ``mosaic match --help``; ``factory(argument, seat)``:
    the operator for the text after ``name:`` (``""`` when none), or :class:`OperatorError`."""

    name: str
    kind: str
    summary: str
    factory: Callable[[str, Seat], Operator]

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", self.name or ""):
            raise ValueError(f"OperatorInfo.name must be a lower-case word, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"OperatorInfo {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.summary or not callable(self.factory):
            raise ValueError(f"OperatorInfo {self.name!r} needs a summary and a callable factory")
