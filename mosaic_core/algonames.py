"""Algorithm names, one rule for every worker: ``algo`` is one of the worker's names spelt as
the worker spells it, or in another case when that names exactly one of them (``ppo`` for
RLlib's ``PPO``, ``MAPPO`` for XuanCe's ``mappo``); anything else is refused with a "did you
mean". A worker declares its names (:meth:`mosaic_core.worker.Worker.algorithm_names`); the
run pipeline applies the rule, and the choice of a worker for a run that names none
(:mod:`mosaic_core.choice`) asks it too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def spelling(algo: str, names: Iterable[str]) -> str | None:
    """The worker's spelling of ``algo``: itself when it is one of ``names``, else the one name
    equal to it ignoring case; None when there is none, or several."""
    names = list(names)
    if algo in names:
        return algo
    folded = [name for name in names if name.casefold() == algo.casefold()]
    return folded[0] if len(folded) == 1 else None


def unknown_algorithm(algo: str, names: Iterable[str], worker: str) -> str:
    """Why ``algo`` is none of ``worker``'s ``names``, with the closest one (any case)."""
    names = sorted(set(names), key=lambda name: (name.casefold(), name))
    same = [name for name in names if name.casefold() == algo.casefold()]
    if len(same) > 1:
        return f"algo {algo!r} matches {' and '.join(same)} of the {worker} worker: give one of them as it is spelt"
    by_fold = {name.casefold(): name for name in names}
    close = difflib.get_close_matches(algo.casefold(), list(by_fold), n=1, cutoff=0.6)
    hint = f"; did you mean {by_fold[close[0]]}?" if close else ""
    return f"algo {algo!r} is not one the {worker} worker runs{hint} (known: {', '.join(names) or 'none'})"
