"""Hook implementations of the arena plugin: its hook specs, its own operator kinds through
``mosaic_operators``, a match's live frames (``mosaic_frame_source``), what the dashboard reads and
sends without importing the arena (leagues' standings, a human seat's turns and moves), and the
``mosaic match`` and ``mosaic league`` commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import CliCommand, hookimpl


@hookimpl
def mosaic_hookspecs():
    from mosaic_arena import hookspecs

    return [hookspecs]


@hookimpl
def mosaic_operators():
    from mosaic_arena.builtin import random_operator, scripted_operator
    from mosaic_arena.human import human_operator
    from mosaic_arena.operators import OperatorInfo
    from mosaic_arena.served import run_operator

    return [
        OperatorInfo("random", "random", "a uniformly random legal action", random_operator),
        OperatorInfo("scripted", "scripted", "scripted:NAME, a mosaic.operators entry point", scripted_operator),
        OperatorInfo("run", "policy", "run:RUN_ID[@STEP], a run's policy in its own process", run_operator),
        OperatorInfo("human", "human", "a person, on the dashboard's page of the match", human_operator),
    ]


@hookimpl(tryfirst=True)  # before FastLane's source, which answers for every run
def mosaic_frame_source(run_dir: Path, extras: dict[str, Any]) -> Any:
    """A match's board, live (:mod:`mosaic_arena.live`); None for any other run."""
    from mosaic_arena.live import MatchFrames, is_match

    return MatchFrames(run_dir) if is_match(run_dir) else None


@hookimpl
def mosaic_league_standings(runs_root: Path) -> list[dict[str, Any]]:
    from mosaic_arena.leagues import leagues_under

    return leagues_under(runs_root)


@hookimpl
def mosaic_human_turns(run_dir: Path) -> dict[str, Any] | None:
    from mosaic_arena.human import waiting
    from mosaic_arena.live import is_match

    return waiting(run_dir) if is_match(run_dir) else None


@hookimpl
def mosaic_human_answer(run_dir: Path, answer: Any) -> bool | str | None:
    from mosaic_arena.human import answer as pass_on
    from mosaic_arena.live import is_match

    if not is_match(run_dir):
        return None
    return pass_on(run_dir, answer) or True


def _configure(parser):
    from mosaic_arena.match import configure

    configure(parser)


def _run(ns):
    from mosaic_arena.match import run

    return run(ns)


def _configure_league(parser):
    from mosaic_arena.league import configure

    configure(parser)


def _run_league(ns):
    from mosaic_arena.league import run

    return run(ns)


@hookimpl
def mosaic_cli_commands():
    return [
        CliCommand("match", "operators play a multi-agent game, seat by seat, recorded like a run", _configure, _run),
        CliCommand(
            "league", "a round-robin of operators: ratings, a cross-play matrix, CIs", _configure_league, _run_league
        ),
    ]
