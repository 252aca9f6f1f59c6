"""``run:RUN_ID[@STEP]``: a recorded run's policy, served from a process of its own."""

from __future__ import annotations

from mosaic_arena.operators import OperatorError, Seat


def run_operator(argument: str, seat: Seat):
    raise OperatorError("not yet")
