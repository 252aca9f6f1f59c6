"""The hooks the arena plugin declares (through its ``mosaic_hookspecs``): operator kinds, the one way
a seat's decision-maker is registered (the arena's own kinds come through it too); and what a viewer
that does not import the arena (the dashboard) reads and sends through it: leagues' standings, a
human seat's turns and moves. The arena implements those itself; the formats stay its own."""

from __future__ import annotations

from pathlib import Path
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


@hookspec(ISOLATE)
def mosaic_league_standings(runs_root: Path) -> list[dict[str, Any]] | None:
    """The standings of every league under ``runs_root`` (its ``league-NAME.json`` files, each as
    ``mosaic league show --json`` prints it), read by the plugin that writes them, for a viewer that
    does not import it (the dashboard's League page). Called on each look. Failure: isolate (that
    plugin's leagues are missing).

    **Example:**

    .. code-block:: python

        @hookimpl(optionalhook=True)
        def mosaic_league_standings(runs_root):
            return [read_my_league(path) for path in sorted(runs_root.glob("my-league-*.json"))]
    """


@hookspec(ISOLATE)
def mosaic_human_turns(run_dir: Path) -> dict[str, Any] | None:
    """The human seats of the match in ``run_dir``: ``{"status": the match's, "seats": {NAME: {"turn":
    the open turn (its ``turn`` number, ``legal`` actions, ``buttons`` with label and key, ``columns``,
    ``deadline``) or None, "outcomes": [...]}}}``; None when it is no match of this plugin's. Called
    by a page that shows the match (each call says a page looks). Failure: isolate (no human panel).

    **Example:**

    .. code-block:: python

        @hookimpl(optionalhook=True)
        def mosaic_human_turns(run_dir):
            return {"status": "running", "seats": {"player_1": {"turn": None, "outcomes": []}}}
    """


@hookspec(ISOLATE)
def mosaic_human_answer(run_dir: Path, answer: Any) -> bool | str | None:
    """A page's answer for a human seat of the match in ``run_dir`` (``{"seat", "turn", "action"}``, or
    ``"leave": true`` when the page closes), passed on to the match: True when taken, else the reason
    it is refused (an action the turn does not allow, a turn no longer open); None when the run is no
    match of this plugin's. Failure: isolate (the page is told the answer was not taken).

    **Example:**

    .. code-block:: python

        @hookimpl(optionalhook=True)
        def mosaic_human_answer(run_dir, answer):
            return True if answer.get("action") in legal_now(run_dir) else "not a legal action now"
    """
