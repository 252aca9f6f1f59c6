"""Hook implementations of the mosaic_cleanrl plugin.

Command: ``mosaic envs [--json] [--family F] [--all]``: the env catalog (:mod:`mosaic_cleanrl.catalog`).
The worker's views of the host's ``mosaic algos`` (list, presets, ``show ALGO``) are in
:mod:`mosaic_cleanrl.algos_cli`.

Env families (:mod:`mosaic_cleanrl.env_families`): a CleanRL run's training process gets the
family's ids registered (ALE) and ``MUJOCO_GL=egl`` for MuJoCo on a headless machine (a run
on an env whose family is not installed is refused by the worker's ``validate``). Every hook
but the commands checks ``run.worker`` / ``child.worker``: other workers' runs are not its
business. The worker's own event (``eval_batch``) is declared by the worker.
"""

from __future__ import annotations

import argparse
import json

from mosaic_core import CliCommand, hookimpl

WORKER = "cleanrl"  # the hooks below only make sense for runs of this worker (run.worker / child.worker)


def _configure_envs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--family",
        action="append",
        default=[],
        metavar="FAMILY",
        help="only this family (repeatable): classic_control, box2d, mujoco, atari, minigrid, other",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also every Atari id variant (v0, Deterministic, -ram) and ids that fail to make",
    )


def _run_envs(ns: argparse.Namespace) -> int:
    from mosaic_cleanrl.catalog import ALGORITHM_SPACES, catalog, family_summary, is_main_variant

    entries = catalog(tuple(ns.family))
    if ns.json:
        print(
            json.dumps(
                {
                    "families": family_summary(),
                    "algorithms": {algo: fit.describe() for algo, fit in ALGORITHM_SPACES.items()},
                    "envs": [e.to_dict() for e in entries],
                },
                indent=2,
            )
        )
        return 0
    from rich.markup import escape
    from rich.table import Table

    from mosaic_core import make_console

    console = make_console()
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
            table.add_row(
                escape(entry.env_id),
                entry.observation + shape,
                entry.action + size,
                ", ".join(entry.algorithms) or (f"[red]{escape(entry.error)}[/red]" if entry.error else "-"),
            )
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
    return [
        CliCommand(
            "envs",
            "list environments by family: installed or not, spaces, which bundled algorithms fit",
            _configure_envs,
            _run_envs,
        )
    ]


@hookimpl
def mosaic_child_env(run):
    """``MUJOCO_GL=egl`` for a MuJoCo env on a headless machine, unless the user set ``MUJOCO_GL``."""
    import os

    if run.worker != WORKER:
        return None
    from mosaic_cleanrl.env_families import headless_rendering_env

    return headless_rendering_env(run.config.env_id, dict(os.environ)) or None


@hookimpl
def mosaic_child_setup(child):
    """Register the env family's ids (ALE) before the script makes its envs."""
    from mosaic_cleanrl.env_families import prepare_family

    if child.worker == WORKER and child.env_id:
        prepare_family(child.env_id)


def _read_json(path):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _policy_eval_section(summary):
    stats = summary.get("return") if isinstance(summary.get("return"), dict) else {}
    discounted = summary.get("discounted_return") if isinstance(summary.get("discounted_return"), dict) else {}
    return {
        "summary": "eval_summary.json",
        "status": summary.get("status"),
        "episodes": summary.get("episodes"),
        "mean_return": stats.get("mean"),
        "std_return": stats.get("std"),
        "mean_discounted_return": discounted.get("mean"),
        "gamma": summary.get("gamma"),
    }


def _periodic_section(history_path, run_dir):
    history = _read_json(history_path)
    if history is None:
        return None
    evaluations = [e for e in history.get("evaluations") or [] if isinstance(e, dict)]
    best = history.get("best") if isinstance(history.get("best"), dict) else None
    best_model = best.get("path") if best else None
    return {
        "history": str(history_path.relative_to(run_dir)),
        "eval_frequency": history.get("eval_frequency"),
        "eval_episodes": history.get("eval_episodes"),
        "seed": history.get("seed"),
        "deterministic": history.get("deterministic"),
        "evaluations": len(evaluations),
        "curve": [[e.get("global_step"), e.get("mean_return")] for e in evaluations],
        "last": {k: evaluations[-1].get(k) for k in ("global_step", "mean_return", "std_return")}
        if evaluations
        else None,
        "best": {k: best.get(k) for k in ("global_step", "mean_return", "std_return")} if best else None,
        "best_model": best_model if best_model and (run_dir / best_model).is_file() else None,
    }


@hookimpl
def mosaic_build_manifest(run, status):
    """The ``evaluation`` section: policy_eval's ``eval_summary.json`` (its fields at the top) and/or
    evaluation during training (``periodic``, from each ``runs/*/eval_history.json``)."""
    if run.worker != WORKER:
        return None
    section = {}
    summary = _read_json(run.run_dir / "eval_summary.json")
    if summary is not None:
        section.update(_policy_eval_section(summary))
    periodic = [
        p
        for p in (_periodic_section(path, run.run_dir) for path in sorted(run.run_dir.glob("runs/*/eval_history.json")))
        if p
    ]
    if periodic:
        section["periodic"] = periodic[-1]  # one training script per run directory
    return {"evaluation": section} if section else None
