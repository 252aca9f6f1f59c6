"""Hook implementations of the cleanrl_worker plugin.

``mosaic algos [--json] [--cleanrl-home DIR]``: every algorithm the CleanRL worker knows,
each source it is available from, the one that wins, and the resolution order.
``mosaic envs [--json] [--family F] [--all]``: the env catalog (:mod:`cleanrl_worker.catalog`).

Env families (:mod:`cleanrl_worker.env_families`): a run on an env whose family is not
installed stops at validation with one line naming the extra; the training process gets
the family's ids registered (ALE) and ``MUJOCO_GL=egl`` for MuJoCo on a headless machine.
"""

from __future__ import annotations

import argparse
import json

from mosaic_core.cli.commands import CliCommand
from mosaic_core.hookspecs import hookimpl


def _configure_algos(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--cleanrl-home", metavar="DIR",
                        help="a CleanRL checkout to include (default: $MOSAIC_CLEANRL_HOME)")
    parser.add_argument("--all", action="store_true",
                        help="also list upstream CleanRL names that are not available here")


def _run_algos(ns: argparse.Namespace) -> int:
    from cleanrl_worker.registry import ORDER_TEXT, RESOLUTION_ORDER, list_algorithms

    entries = list_algorithms(ns.cleanrl_home, origin="--cleanrl-home")
    if ns.json:
        print(json.dumps({"resolution_order": list(RESOLUTION_ORDER), "algorithms": [e.to_dict() for e in entries]},
                         indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    shown = [e for e in entries if e.sources or e.error or ns.all]
    table = Table(title="CleanRL worker algorithms (* = used for --algo NAME)")
    for column in ("algorithm", "sources", "script"):
        table.add_column(column, overflow="fold")
    for entry in shown:
        sources = ", ".join(("*" if entry.winner is s else "") + s.source for s in entry.sources)
        if entry.error:
            sources, script = f"[red]error[/red] {sources}".strip(), entry.error
        elif not entry.sources:
            sources, script = "-", "upstream CleanRL: needs a checkout (MOSAIC_CLEANRL_HOME)"
        else:
            script = str(entry.winner.script)
        table.add_row(entry.name, sources, script)
    console = Console(width=160)
    console.print(table)
    hidden = len(entries) - len(shown)
    if hidden:
        console.print(f"{hidden} more upstream CleanRL names need a checkout: mosaic algos --all lists them")
    console.print(f"resolution order: {ORDER_TEXT}")
    return 0


def _configure_envs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--family", action="append", default=[], metavar="FAMILY",
                        help="only this family (repeatable): classic_control, box2d, mujoco, atari, minigrid, other")
    parser.add_argument("--all", action="store_true",
                        help="also every Atari id variant (v0, Deterministic, -ram) and ids that fail to make")


def _run_envs(ns: argparse.Namespace) -> int:
    from cleanrl_worker.catalog import ALGORITHM_SPACES, catalog, family_summary, is_main_variant

    entries = catalog(tuple(ns.family))
    if ns.json:
        print(json.dumps({"families": family_summary(),
                          "algorithms": {algo: fit.describe() for algo, fit in ALGORITHM_SPACES.items()},
                          "envs": [e.to_dict() for e in entries]}, indent=2))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=160)
    shown = [e for e in entries if ns.all or is_main_variant(e)]
    for family in family_summary():
        rows = [e for e in shown if e.family == family["family"]]
        if not rows:
            continue
        state = "installed" if family["installed"] else f"[yellow]not installed[/yellow]: {escape(family['install'])}"
        table = Table(title=f"{family['title']} ({state})", title_justify="left")
        for column in ("env id", "observation", "action", "bundled algorithms"):
            table.add_column(column, overflow="fold")
        for entry in rows:
            shape = f" {tuple(entry.observation_shape)}" if entry.observation_shape else ""
            size = f" ({entry.action_size})" if entry.action_size else ""
            table.add_row(escape(entry.env_id), entry.observation + shape, entry.action + size,
                          ", ".join(entry.algorithms) or (f"[red]{escape(entry.error)}[/red]" if entry.error else "-"))
        console.print(table)
    others = [e for e in shown if e.family == "other"]
    if others:
        console.print("other registered ids: " + ", ".join(e.env_id for e in others))
    hidden = len(entries) - len(shown)
    if hidden:
        console.print(f"{hidden} more ids (Atari variants, ids that fail to make): mosaic envs --all lists them")
    return 0


@hookimpl
def mosaic_cli_commands() -> list[CliCommand]:
    return [CliCommand("algos", "list the CleanRL worker's algorithms, where each comes from and which one wins",
                       _configure_algos, _run_algos),
            CliCommand("envs", "list environments by family: installed or not, spaces, which bundled algorithms fit",
                       _configure_envs, _run_envs)]


def _bundled_fit_problem(config) -> str | None:
    """A bundled algorithm on an env family whose spaces it cannot take (e.g. sac on Atari)."""
    from pathlib import Path

    from cleanrl_worker.catalog import static_fit_problem
    from cleanrl_worker.registry import resolve
    from mosaic_core.errors import UsageError

    if not isinstance(config.algo, str) or not config.algo.isidentifier():
        return None
    try:
        algorithm = resolve(config.algo, cleanrl_home=config.extras.get("cleanrl_home"), cwd=Path.cwd())
    except UsageError:
        return None  # an unknown name is reported where the algorithm is resolved
    return static_fit_problem(config.algo, config.env_id) if algorithm.source == "bundled" else None


@hookimpl
def mosaic_validate_config(config):
    """An env whose family is not installed (Atari, MuJoCo, …): one problem naming the extra; a
    bundled algorithm on a family whose spaces it cannot take; a ``gym_compat`` that is not a bool."""
    from cleanrl_worker.env_families import missing_family_message

    problems = [missing_family_message(config.env_id), _bundled_fit_problem(config)] \
        if isinstance(config.env_id, str) else []
    compat = config.extras.get("gym_compat")
    if compat is not None and not isinstance(compat, bool):
        problems.append(f"extras.gym_compat must be true or false (0.29 vector-env semantics), got {compat!r}")
    return [problem for problem in problems if problem] or None


@hookimpl
def mosaic_child_env(run):
    """``MUJOCO_GL=egl`` for a MuJoCo env on a headless machine, unless the user set ``MUJOCO_GL``."""
    import os

    from cleanrl_worker.env_families import headless_rendering_env

    return headless_rendering_env(run.config.env_id, dict(os.environ)) or None


@hookimpl
def mosaic_child_setup(child):
    """Register the env family's ids (ALE) before the script makes its envs."""
    from cleanrl_worker.env_families import prepare_family

    if child.env_id:
        prepare_family(child.env_id)


@hookimpl
def mosaic_build_manifest(run, status):
    """An ``evaluation`` section when the run wrote ``eval_summary.json`` (policy_eval mode)."""
    path = run.run_dir / "eval_summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stats = summary.get("return") if isinstance(summary.get("return"), dict) else {}
    discounted = summary.get("discounted_return") if isinstance(summary.get("discounted_return"), dict) else {}
    return {"evaluation": {"summary": "eval_summary.json", "status": summary.get("status"),
                           "episodes": summary.get("episodes"), "mean_return": stats.get("mean"),
                           "std_return": stats.get("std"), "mean_discounted_return": discounted.get("mean"),
                           "gamma": summary.get("gamma")}}
