"""After a daemon restart: how a run the last daemon left active is recorded.

The run's own ``events.jsonl`` decides (its last terminal event: completed, cancelled,
failed), so a run that completed while no daemon watched is recorded completed. Only a run
without a terminal event is failed with :data:`RESTART_REASON`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mosaic_core.config import redact
from mosaic_core.events import TERMINAL, events_backwards
from mosaic_core.files import is_within
from mosaic_core.trainer.store import FAULT, TERM, RunRow, RunStore

RESTART_REASON = "daemon restarted while the run was executing"

__all__ = ["RESTART_REASON", "own_terminal_event", "settle_interrupted"]


def own_terminal_event(runs_dir: Path, row: RunRow) -> dict[str, Any] | None:
    """The last terminal event in the run's own ``events.jsonl`` (its run dir, under ``runs_dir``;
    read from its end)."""
    path = Path(row.run_dir) / "events.jsonl"
    if not is_within(runs_dir, path) or path.is_symlink():
        return None
    return next((e for e in events_backwards(path, TERMINAL) if e.get("run_id") == row.run_id), None)


def settle_interrupted(store: RunStore, runs_dir: Path, row: RunRow) -> RunRow | None:
    """Record ``row`` as its events say it ended; returns the new row (None if already final)."""
    terminal = own_terminal_event(runs_dir, row)
    event = terminal["event"] if terminal else None
    payload = terminal.get("payload") if terminal else None
    payload = payload if isinstance(payload, dict) else {}
    values: dict[str, Any] = {"terminal_payload": json.dumps(redact(payload), default=str)}
    if event == "run_completed":
        values.update(status=TERM, terminal_event=event)
    elif event == "run_cancelled":
        values.update(
            status=TERM,
            terminal_event=event,
            failure_reason=f"{RESTART_REASON}; the run was cancelled: {payload.get('reason') or 'no reason given'}",
        )
    elif event == "run_failed":
        values.update(status=FAULT, terminal_event=event, failure_reason=str(payload.get("error") or RESTART_REASON))
    else:
        values.update(status=FAULT, terminal_event="run_failed", failure_reason=RESTART_REASON)
    return store.update(row.run_id, check=lambda r: not r.final, **values)
