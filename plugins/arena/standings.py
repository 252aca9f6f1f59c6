"""A league's standings from its matches' games: OpenSkill ratings with bootstrap 95 % intervals, and a
cross-play matrix (the row's score against the column, a draw half a win, with its interval).

Why OpenSkill (``openskill``, its Plackett-Luce model): ratings with an uncertainty as TrueSkill's,
draws and any number of seats, maintained, MIT-licensed, pure Python without dependencies (the
``trueskill`` package has had no release since 2018; Elo carries no uncertainty). Its ratings depend on the order of the
games, and its sigma is not a confidence interval: the interval here is the bootstrap's, the games
resampled with replacement and rated in a shuffled order, ``REPLICATES`` times, the 2.5th and 97.5th
percentiles of each operator's ``mu``; the rating itself is ``mu`` averaged over shuffled orders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ORDERS", "REPLICATES", "Game", "cross_play", "ratings"]

REPLICATES = 200
ORDERS = 20
SCORE = {"win": 1.0, "draw": 0.5, "loss": 0.0}


@dataclass(frozen=True)
class Game:
    """One game of two operators: ``first``'s outcome (win, loss or draw) against ``second``."""

    first: str
    second: str
    outcome: str


def _rate(operators: Sequence[str], games: Sequence[Game]) -> dict[str, float]:
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    rated = {name: model.rating(name=name) for name in operators}
    for game in games:
        ranks = {"win": [0.0, 1.0], "loss": [1.0, 0.0], "draw": [0.0, 0.0]}[game.outcome]
        [[rated[game.first]], [rated[game.second]]] = model.rate(
            [[rated[game.first]], [rated[game.second]]], ranks=ranks
        )
    return {name: float(rating.mu) for name, rating in rated.items()}


def ratings(operators: Sequence[str], games: Sequence[Game], seed: int = 0) -> dict[str, dict[str, Any]]:
    """Each operator's rating (its ``mu`` averaged over ``ORDERS`` shuffled orders of all the games: a
    rating that does not depend on which match was played first) and its bootstrap 95 % interval."""
    rng = np.random.default_rng(seed)
    orders = [_rate(operators, [games[i] for i in rng.permutation(len(games))]) for _ in range(ORDERS)]
    point = {name: float(np.mean([order[name] for order in orders])) for name in operators}
    samples: dict[str, list[float]] = {name: [] for name in operators}
    for _ in range(REPLICATES if games else 0):
        drawn = [games[i] for i in rng.integers(len(games), size=len(games))]
        for name, mu in _rate(operators, drawn).items():
            samples[name].append(mu)
    return {
        name: {
            "mu": point[name],
            "ci95": _interval(samples[name]),
            "games": sum(name in (g.first, g.second) for g in games),
        }
        for name in operators
    }


def cross_play(operators: Sequence[str], games: Sequence[Game], seed: int = 0) -> dict[str, dict[str, Any]]:
    """``matrix[row][column]``: the row's mean score against the column (both seat orders), its bootstrap
    95 % interval and the number of games; None where the two never met."""
    rng = np.random.default_rng(seed)
    matrix: dict[str, dict[str, Any]] = {}
    for row in operators:
        matrix[row] = {}
        for column in operators:
            scores = [SCORE[g.outcome] for g in games if (g.first, g.second) == (row, column)]
            scores += [1.0 - SCORE[g.outcome] for g in games if (g.first, g.second) == (column, row)]
            if row == column or not scores:
                matrix[row][column] = None
                continue
            values = np.asarray(scores)
            means = [float(values[rng.integers(len(values), size=len(values))].mean()) for _ in range(REPLICATES)]
            matrix[row][column] = {"score": float(values.mean()), "ci95": _interval(means), "games": len(scores)}
    return matrix


def _interval(values: list[float]) -> list[float] | None:
    if not values:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [float(low), float(high)]
