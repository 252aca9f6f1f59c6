"""The arena's own operator kinds: ``random`` and ``scripted:NAME`` (``run:RUN_ID[@STEP]`` is in
:mod:`mosaic_arena.served`). Registered through ``mosaic_operators`` like a third party's."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from mosaic_arena.games import legal_mask
from mosaic_arena.operators import OperatorError, Seat

__all__ = ["OPERATORS_GROUP", "FunctionOperator", "RandomOperator", "random_operator", "scripted_operator"]

OPERATORS_GROUP = "mosaic.operators"  # NAME = "pkg.module:function", a function (observation, info) -> action


class RandomOperator:
    """A uniformly random legal action (the action mask's, else the space's), from its seat's seed."""

    def __init__(self, seat: Seat):
        self.space = seat.action_space
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.space.seed(int(self.rng.integers(2**31)))

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        mask = legal_mask(observation, info)
        if mask is not None:
            return int(self.rng.choice(np.flatnonzero(np.asarray(mask))))
        return self.space.sample()

    def close(self) -> None:
        pass


class FunctionOperator:
    """A scripted operator: a third party's function ``(observation, info) -> action``."""

    def __init__(self, function: Callable[[Any, dict[str, Any]], Any]):
        self.function = function

    def reset(self, seed: int) -> None:
        pass

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.function(observation, info)

    def close(self) -> None:
        pass


def random_operator(argument: str, seat: Seat) -> RandomOperator:
    if argument:
        raise OperatorError(f"operator random:{argument}: random takes no argument")
    return RandomOperator(seat)


def scripted_operator(argument: str, seat: Seat) -> FunctionOperator:
    """``scripted:NAME`` or ``scripted:PKG:FUNC``: an installed ``mosaic.operators`` entry point, by its
    name or its value. Nothing else is imported: a dotted path that no installed package declares is
    refused, so a file in the current directory never runs."""
    installed = list(entry_points(group=OPERATORS_GROUP))
    found = [ep for ep in installed if argument in (ep.name, ep.value)]
    if not found:
        known = ", ".join(sorted(ep.name for ep in installed)) or "none installed"
        raise OperatorError(
            f"operator scripted:{argument}: no installed {OPERATORS_GROUP} entry point is named so "
            f"(a package declares its scripts in that group; installed: {known})"
        )
    if len({ep.value for ep in found}) > 1:
        where = " and ".join(sorted(f"{ep.value} ({ep.dist.name if ep.dist else '?'})" for ep in found))
        raise OperatorError(f"operator scripted:{argument}: two installed entry points have that name: {where}")
    try:
        function = found[0].load()
    except Exception as exc:
        raise OperatorError(f"operator scripted:{argument}: loading {found[0].value} failed: {exc}") from None
    if not callable(function):
        raise OperatorError(f"operator scripted:{argument}: {found[0].value} is not a function")
    return FunctionOperator(function)
