"""``mosaic logs RUN [--follow] [--json] [--target HOST:PORT]``: a run's lifecycle events in
human form, from its ``events.jsonl`` (a daemon's run: found through the daemon, whose run
directories are on this machine). ``--follow`` waits for new events until the run ends."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError, UsageError
from mosaic_core.files import printable
from mosaic_core.jsontext import dumps
from mosaic_core.runstore.follow import EventFollower, RunGone
from mosaic_core.runstore.summary import progress_of

TERMINAL = ("run_completed", "run_failed", "run_cancelled")
POLL_S = 0.2
APPEAR_S = 60.0  # --follow waits this long for a run that has not started yet


def _number(value: Any, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def describe(event: dict[str, Any], episode_event: str | None = None) -> str:
    """One line for a person: time, event, and what matters in its payload. ``episode_event``:
    the event that counts a run's episodes (its ``run_started`` payload's ``progress``)."""
    name, payload = event.get("event", "?"), event.get("payload") or {}
    stamp = time.strftime("%H:%M:%S", time.localtime(event.get("timestamp", 0)))
    if name == "run_started":
        what = (
            f"{payload.get('worker')} {payload.get('algo')} on {payload.get('env_id')}, "
            f"{payload.get('total_timesteps') or 0:,} steps in {payload.get('run_dir')}"
        )  # none: an evaluation
    elif name == "run_resumed":
        what = f"resume {payload.get('attempt')} from step {payload.get('from_step')} ({payload.get('checkpoint')})"
    elif name == "metrics":
        what = (
            f"step {payload.get('global_step', 0):,} ({_number(100 * (payload.get('progress') or 0), 0)}%), "
            f"return {_number(payload.get('episodic_return_smoothed', payload.get('episodic_return')))}, "
            f"{_number(payload.get('sps'), 0)} SPS"
        )
    elif name == "heartbeat":
        what = f"alive after {_number(payload.get('elapsed_s'))} s"
    elif name == "checkpoint_saved":
        what = f"step {payload.get('global_step', '?')}: {payload.get('path')}"
    elif name == "curriculum_stage":
        what = f"stage {payload.get('stage')} ({payload.get('env_id')})"
    elif name == episode_event:
        what = (
            f"{payload.get('episodes_done')}/{payload.get('episodes_total')} episodes, "
            f"mean return {_number(payload.get('mean_return'), 2)}"
        )
    elif name == "note":
        what = str(payload.get("text", payload))
    elif name == "run_failed":
        what = f"{payload.get('error')} (exit code {payload.get('returncode')})"
    elif name == "run_cancelled":
        what = str(payload.get("reason", ""))
    elif name == "run_completed":
        what = f"exit code {payload.get('returncode', 0)}"
    else:
        what = json.dumps(payload, default=str)[:200]
    return f"{stamp} {name:17} {what}"


def follow(path: Path, keep_going: bool) -> Iterator[dict[str, Any]]:
    """Events of ``path`` (bad and over-long lines skipped, memory bounded whatever the file
    holds); with ``keep_going``, wait for more until the run's terminal event."""
    follower = EventFollower(path.parent)
    while True:
        try:
            events = follower.poll()
        except RunGone:
            events = []
        if follower.refused:
            raise MosaicError(follower.refused)
        for event in events:
            yield event
            if event.get("event") in TERMINAL:
                return
        if follower.behind:
            continue
        if not keep_going:
            return
        time.sleep(POLL_S)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="a run id, or a unique prefix of one")
    parser.add_argument("--follow", "-f", action="store_true", help="wait for new events until the run ends")
    parser.add_argument("--json", action="store_true", help="print the JSON lines as they are")
    parser.add_argument("--runs-dir", help="runs root (default: see `mosaic run --help`)")
    parser.add_argument("--target", metavar="HOST:PORT", help="a trainer daemon: follow one of its runs")
    parser.add_argument("--state-dir", help="with --target: the daemon's state dir (its client.token)")
    parser.add_argument("--token-file", help="with --target: the daemon's client token file (or $MOSAIC_TOKEN)")


def run(ns: argparse.Namespace) -> int:
    if ns.target:
        from mosaic_core.toolkit import find_token
        from mosaic_core.trainer import client

        token = find_token(ns.token_file, ns.state_dir)
        records = [r for r in client.list_runs(ns.target, token=token) if r.run_id.startswith(ns.run_id)]
        if len(records) != 1:
            found = ", ".join(r.run_id for r in records[:5]) or "none"
            raise UsageError(f"run id {ns.run_id!r} matches {len(records)} runs of the daemon at {ns.target} ({found})")
        run_dir = Path(records[0].run_dir)
    else:
        from mosaic_core.toolkit import default_runs_root, find_run_dir

        root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
        deadline = time.monotonic() + (APPEAR_S if ns.follow else 0)
        while True:  # with --follow, a run about to start is waited for
            try:
                run_dir = find_run_dir(root, ns.run_id)
                break
            except UsageError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(POLL_S)
    path = run_dir / "events.jsonl"
    if not ns.follow and not path.exists():
        raise UsageError(f"run {run_dir.name} has no events yet ({path})")
    counted = None
    try:
        for event in follow(path, ns.follow):
            if event.get("event") == "run_started":
                counted = progress_of(event.get("payload") or {}, 0).event
            print(dumps(event) if ns.json else printable(describe(event, counted)), flush=True)
    except KeyboardInterrupt:
        return 130
    return 0
