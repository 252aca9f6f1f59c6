"""Hook implementations of the arena plugin: its hook spec (``mosaic_operators``), its own operator kinds
through that hook, and the ``mosaic match`` and ``mosaic league`` commands."""

from __future__ import annotations

from mosaic_core import CliCommand, hookimpl


@hookimpl
def mosaic_hookspecs():
    from mosaic_arena import hookspecs

    return [hookspecs]


@hookimpl
def mosaic_operators():
    from mosaic_arena.builtin import random_operator, scripted_operator
    from mosaic_arena.operators import OperatorInfo
    from mosaic_arena.served import run_operator

    return [
        OperatorInfo("random", "random", "a uniformly random legal action", random_operator),
        OperatorInfo("scripted", "scripted", "scripted:NAME, a mosaic.operators entry point", scripted_operator),
        OperatorInfo("run", "policy", "run:RUN_ID[@STEP], a run's policy in its own process", run_operator),
    ]


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
