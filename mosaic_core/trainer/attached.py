"""Attached runs: runs of training programs started by hand (``python -m cleanrl_worker.cli
--config … --grpc --grpc-target HOST:PORT``) that registered with the owner's client token.

The daemon has no process of such a run and does not read its stdout: the program reports its
``run_started`` and terminal event through its session (ReportRunEvent), its heartbeats keep
it alive, and the watchdog fails it when it falls silent, as it does a spawned run. A daemon
restart leaves it active (its program may still be going). The daemon cannot stop it: its
owner stops the program where it runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from mosaic_core.config import redact
from mosaic_core.events import TERMINAL
from mosaic_core.trainer.store import ACTIVE, EXEC, FAULT, RDY, TERM, RunRow, RunStore

REPORTED = ("run_started", *TERMINAL)  # what a session reports; the rest stays in the run's events.jsonl


def attach(
    store: RunStore,
    run_id: str,
    worker: str,
    worker_id: str | None,
    registration: str,
    token_hash: str,
    log: Callable[[str], None],
) -> RunRow:
    """Record the run as its program registers (RDY). The caller holds the store's lock and has
    checked that ``run_id`` is free."""
    row = store.insert(
        run_id=run_id,
        worker=worker,
        status=RDY,
        digest="",
        config_json="{}",
        config_path="",
        run_dir="",
        token_hash=token_hash,
        worker_id=worker_id,
        registration=registration,
        last_heartbeat=time.time(),
        metadata=json.dumps({"attached": True}),
    )
    log(f"run {run_id}: registered by a {worker} training program this daemon did not start")
    return row


def report(store: RunStore, row: RunRow, event: str, payload: dict[str, Any], log: Callable[[str], None]) -> bool:
    """Record a lifecycle event of an attached run; False when the run had ended already."""
    now = time.time()
    if event == "run_started":
        values: dict[str, Any] = {"status": EXEC, "last_heartbeat": now}
        if isinstance(payload.get("run_dir"), str):
            values["run_dir"] = payload["run_dir"]  # where its program keeps it: shown, never removed by the daemon
        started = {key: payload[key] for key in ("algo", "env_id") if isinstance(payload.get(key), str)}
        if started:
            values["config_json"] = json.dumps(started)
        return store.update(row.run_id, check=lambda r: r.status in ACTIVE, **values) is not None
    ended = store.update(row.run_id, check=lambda r: not r.final, **_ended(event, payload, now))
    if ended is not None:
        log(f"run {row.run_id}: {event} (reported by its training program)")
    return ended is not None


def _ended(event: str, payload: dict[str, Any], now: float) -> dict[str, Any]:
    values: dict[str, Any] = {"terminal_payload": json.dumps(redact(payload), default=str), "last_heartbeat": now}
    code = payload.get("returncode")
    if isinstance(code, int) and not isinstance(code, bool):
        values["exit_code"] = code
    if event == "run_completed":
        values.update(status=TERM, terminal_event=event)
    elif event == "run_cancelled":
        values.update(status=TERM, terminal_event=event, failure_reason=str(payload.get("reason") or "cancelled"))
    else:
        values.update(status=FAULT, terminal_event=event, failure_reason=str(payload.get("error") or "it failed"))
    return values


def fail_silent(store: RunStore, now: float, timeout: float, log: Callable[[str], None]) -> None:
    """Fail each attached run whose program has not been heard of for ``timeout`` seconds."""

    def silent(row: RunRow) -> float:
        return now - (row.last_heartbeat or row.updated_at)

    for row in store.list(ACTIVE):
        if not row.attached or silent(row) <= timeout:
            continue
        reason = f"no heartbeat for {silent(row):.1f} s (heartbeat timeout {timeout:g} s)"
        failed = store.update(
            row.run_id,
            check=lambda r: not r.final and silent(r) > timeout,  # not heard of meanwhile
            status=FAULT,
            terminal_event="run_failed",
            failure_reason=reason,
        )
        if failed is not None:
            log(f"run {row.run_id}: run_failed: {reason}")
