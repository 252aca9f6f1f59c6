"""Hook implementations of the cleanrl_worker plugin, and its commands: ``mosaic algos``
(:mod:`cleanrl_worker.algos_cli`) and ``mosaic enjoy`` (:mod:`cleanrl_worker.enjoy_cli`)."""

from __future__ import annotations

import json

from mosaic_core.cli.commands import CliCommand
from mosaic_core.hookspecs import hookimpl
from mosaic_core.types import ChildEvent


@hookimpl
def mosaic_child_events() -> list[ChildEvent]:
    return [ChildEvent("checkpoint_saved", "a bundled algorithm wrote a checkpoint"),
            ChildEvent("eval_batch", "policy_eval finished a batch of episodes")]


@hookimpl
def mosaic_cli_commands() -> list[CliCommand]:
    from cleanrl_worker import algos_cli, enjoy_cli

    return [CliCommand("algos", "the CleanRL worker's algorithms (list, presets, show ALGO: its flags)",
                       algos_cli.configure, algos_cli.run),
            CliCommand("enjoy", "play a trained policy: per-episode returns, a video, or live FastLane frames",
                       enjoy_cli.configure, enjoy_cli.run)]


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
