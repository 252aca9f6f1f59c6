"""The CleanRL worker's view of ``mosaic algos`` (the host's command, :mod:`mosaic_core.cli.algos`):

    mosaic algos [--all] [--json] [--cleanrl-home DIR]    every algorithm, its sources, the winner
    mosaic algos presets [ALGO] [--json]                   the tuned hyperparameter presets
    mosaic algos show ALGO [--json]                        the script's flags: type, default, help

``show`` reads the script's ``Args`` with the same AST reading the dry run uses
(:mod:`cleanrl_worker.script_args`): no torch, nothing of the script runs. Only light
imports at module level: ``mosaic --help`` loads this file.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mosaic_core import UsageError
from mosaic_core.toolkit import print_table as table

VIEWS = ("list", "presets", "show")


def configure(parser: argparse.ArgumentParser) -> None:
    """The CleanRL worker's own flags of ``mosaic algos`` (the host adds VIEW, ALGO, --worker, --json)."""
    parser.add_argument(
        "--cleanrl-home", metavar="DIR", help="cleanrl: a CleanRL checkout to include (default: $MOSAIC_CLEANRL_HOME)"
    )
    parser.add_argument(
        "--all", action="store_true", help="cleanrl: also list upstream CleanRL names that are not available here"
    )


def run(ns: argparse.Namespace) -> int:
    if ns.view not in VIEWS:
        raise UsageError(f"mosaic algos {ns.view}: the cleanrl worker's views are {', '.join(VIEWS)}")
    if ns.view == "show":
        if not ns.algo:
            raise UsageError("mosaic algos show needs ALGO (e.g. mosaic algos show ppo)")
        return _show(ns)
    if ns.algo and ns.view == "list":
        raise UsageError(f"unexpected {ns.algo!r}: mosaic algos [presets [ALGO] | show ALGO]")
    return _presets(ns) if ns.view == "presets" else _list(ns)


# What `mosaic resume` continues of a run, per kind of algorithm (docs/resume-and-evaluate.md).
RESUME_NOTE = (
    "bundled algorithms save checkpoints/step_N.cleanrl_model (on a stop too) and `mosaic resume` continues "
    "them, restoring RNG, env and loop state (the off-policy ones' replay buffer too, kept by default up to "
    "extras.save_replay_buffer_max_mb), so on classic-control, Atari and MuJoCo envs a resumed run gives the same "
    "returns; Procgen and envpool envs resume with fresh episodes (their envs' state is not saved); "
    "upstream scripts (a checkout or a path) resume only through their own flags"
)


def _list(ns: argparse.Namespace) -> int:
    from cleanrl_worker.registry import ORDER_TEXT, RESOLUTION_ORDER, list_algorithms

    entries = list_algorithms(ns.cleanrl_home, origin="--cleanrl-home")
    if ns.json:
        print(
            json.dumps(
                {
                    "resolution_order": list(RESOLUTION_ORDER),
                    "resume": RESUME_NOTE,
                    "algorithms": [e.to_dict() for e in entries],
                },
                indent=2,
            )
        )
        return 0
    from rich.markup import escape
    from rich.table import Table

    from mosaic_core.toolkit import make_console

    shown = [e for e in entries if e.sources or e.error or e.documented or ns.all]
    table = Table(title="CleanRL worker algorithms (* = used for --algo NAME)")
    for column in ("algorithm", "sources", "status", "script"):
        table.add_column(column, overflow="fold")
    styles = {"ready": "green", "needs_extra": "yellow", "needs_checkout": "yellow", "cannot_run": "red"}
    for entry in shown:
        sources = ", ".join(("*" if entry.winner is s else "") + s.source for s in entry.sources) or "-"
        status = entry.status()
        script = entry.error or (str(entry.winner.script) if entry.winner else "-")
        table.add_row(
            escape(entry.name), escape(sources), f"[{styles[status.state]}]{escape(status.text)}[/]", escape(script)
        )
    console = make_console()
    console.print(table)
    hidden = len(entries) - len(shown)
    if hidden:
        console.print(
            f"{hidden} more upstream CleanRL names (not in MOSAIC's table) need a checkout: "
            "mosaic algos --all lists them"
        )
    console.print(f"resolution order: {ORDER_TEXT}")
    console.print("flags of one algorithm: mosaic algos show ALGO; tuned presets: mosaic algos presets")
    console.print(f"resume: {RESUME_NOTE}")
    return 0


def _presets(ns: argparse.Namespace) -> int:
    from cleanrl_worker.presets import all_presets

    presets = [p for p in all_presets() if ns.algo in (None, p.algo)]
    if ns.algo and not presets:
        known = ", ".join(sorted({p.algo for p in all_presets()}))
        raise UsageError(f"no presets for algo {ns.algo!r}; presets exist for {known}")
    if ns.json:
        print(json.dumps([p.to_dict() for p in presets], indent=2))
        return 0
    rows = [
        (
            p.algo,
            p.name,
            p.env_id,
            str(p.total_timesteps or "-"),
            " ".join(f"{k}={_text(v)}" for k, v in p.flags.items()),
            p.source + (f" ({p.notes})" if p.notes else ""),
        )
        for p in presets
    ]
    table(
        "hyperparameter presets (mosaic run --worker cleanrl --algo ALGO --env-id ENV --preset NAME)",
        ("algo", "preset", "env", "budget", "flags", "source"),
        rows,
        [
            "precedence: script defaults < preset < extras < script flags on the command line; "
            "the budget applies when --total-timesteps is not given"
        ],
    )
    return 0


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (bool, str)) else str(value)


def _show(ns: argparse.Namespace) -> int:
    from cleanrl_worker.presets import all_presets
    from cleanrl_worker.registry import resolve
    from cleanrl_worker.script_args import read_script_args

    algorithm = resolve(ns.algo, cleanrl_home=ns.cleanrl_home)
    fields = read_script_args(algorithm.script).fields
    presets = [p for p in all_presets() if p.algo == algorithm.name]
    if ns.json:
        print(
            json.dumps(
                {
                    "algorithm": algorithm.name,
                    "source": algorithm.source,
                    "script": str(algorithm.script),
                    "flags": [f.to_dict() for f in fields.values()],
                    "presets": [p.to_dict() for p in presets],
                },
                indent=2,
                default=str,
            )
        )
        return 0
    rows = []
    for f in fields.values():
        flag = f"{f.flag} / --no-{f.flag[2:]}" if f.kind == "bool" else f.flag
        default = f.default_text if f.default_text is not None else repr(f.default)
        rows.append((flag, f.annotation, default, f.help))
    footer = [
        f"script: {algorithm.script} ({algorithm.source})",
        f"give them after the host's flags: mosaic run --worker cleanrl --algo {algorithm.name} "
        "--env-id ENV --learning-rate 1e-3, or as extras",
    ]
    if presets:
        footer.append(
            f"presets: {', '.join(sorted({p.name for p in presets}))} for "
            f"{', '.join(p.env_id for p in presets)} (mosaic algos presets {algorithm.name})"
        )
    table(f"{algorithm.name}: the script's flags", ("flag", "type", "default", "help"), rows, footer)
    return 0
