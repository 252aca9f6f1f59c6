"""The hook the arena plugin declares (through its ``mosaic_hookspecs``): operator kinds, the one way
a seat's decision-maker is registered (the arena's own kinds come through it too)."""

from __future__ import annotations

from typing import Any

from mosaic_core import ISOLATE, hookspec


@hookspec(ISOLATE)
def mosaic_operators() -> list[Any] | None:
    """Operator kinds a match can seat (:class:`mosaic_arena.operators.OperatorInfo`), each by the
    name a seat spec starts with; a name two plugins register is an error naming both.
    Failure: isolate (that plugin's operators are missing).

    **Example:**

    .. code-block:: python

        from mosaic_arena.operators import OperatorInfo

        class FirstLegal:
            def reset(self, seed): pass
            def act(self, observation, info): return int(info["action_mask"].argmax())
            def close(self): pass

        @hookimpl(optionalhook=True)
        def mosaic_operators():
            return [OperatorInfo("first-legal", "scripted", "the first legal move", lambda arg, seat: FirstLegal())]
    """
