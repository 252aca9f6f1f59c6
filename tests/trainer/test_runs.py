"""Submitting, completing, failing, cancelling, timing out and queueing runs (fake worker)."""

from __future__ import annotations

import json
import threading

import pytest

from mosaic_core.errors import MosaicError, UsageError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.processes import group_alive
from mosaic_core.trainer.store import TERM, RunStore

from .conftest import fake_config, pid_alive, record, wait_final, wait_for

ACTIVE = {pb.RUN_STATUS_HSHK, pb.RUN_STATUS_RDY, pb.RUN_STATUS_EXEC}


def _pids(run_dir: str) -> dict[str, int]:
    from pathlib import Path

    path = Path(run_dir) / "pids.json"
    return wait_for(lambda: path.exists() and path.read_text() and json.loads(path.read_text()), what="pids.json")


def test_submit_complete_listed_with_terminal_event(daemon):
    reply = client.submit(daemon.address, fake_config({"duration": 0.2}), run_id="run-ok")
    assert reply.run_id == "run-ok" and len(reply.digest) == 64
    final = wait_final(daemon.address, "run-ok")
    assert (final.status, final.terminal_event, final.exit_code) == (pb.RUN_STATUS_TERM, "run_completed", 0)
    assert final.digest == reply.digest and not final.HasField("failure_reason")
    listed = client.list_runs(daemon.address, [pb.RUN_STATUS_TERM])
    assert [r.run_id for r in listed] == ["run-ok"]
    assert client.list_runs(daemon.address, [pb.RUN_STATUS_FAULT]) == []
    assert final.run_dir.endswith("runs/run-ok") and final.run_dir.startswith(str(daemon.state_dir))
    # The config the worker read is owner-only; nothing outside the state dir was used.
    config = daemon.state_dir / "configs" / "run-ok.json"
    assert config.stat().st_mode & 0o077 == 0
    with pytest.raises(UsageError, match="ALREADY_EXISTS: run 'run-ok' exists already"):
        client.submit(daemon.address, fake_config(), run_id="run-ok")


def test_run_dir_outside_the_state_dir_is_ignored(daemon, tmp_path):
    run_id = client.submit(daemon.address, fake_config({"report_run_dir": str(tmp_path)})).run_id
    final = wait_final(daemon.address, run_id)
    assert final.run_dir == str(daemon.state_dir / "runs" / run_id)  # never swept: it is not the daemon's


def test_failed_run_records_reason(daemon):
    run_id = client.submit(daemon.address, fake_config({"exit_code": 3})).run_id
    final = wait_final(daemon.address, run_id)
    assert (final.status, final.terminal_event, final.exit_code) == (pb.RUN_STATUS_FAULT, "run_failed", 3)
    assert final.failure_reason == "fake failure 3"


def test_worker_dying_without_terminal_event(daemon):
    run_id = client.submit(daemon.address, fake_config({"exit_code": 7, "terminal": False})).run_id
    final = wait_final(daemon.address, run_id)
    assert final.status == pb.RUN_STATUS_FAULT and final.terminal_event == "run_failed"
    assert "exited with code 7 without a terminal event" in final.failure_reason


def test_cancel_mid_run_leaves_no_process(daemon):
    run_id = client.submit(daemon.address, fake_config({"duration": 120, "grandchild": True})).run_id
    wait_for(lambda: record(daemon.address, run_id).status == pb.RUN_STATUS_EXEC, what="run_started")
    pids = _pids(record(daemon.address, run_id).run_dir)
    pgid = daemon.store.get(run_id).pgid
    assert group_alive(pgid) and pid_alive(pids["grandchild"])
    client.cancel(daemon.address, run_id)
    final = record(daemon.address, run_id)  # CancelRun returns once the run has stopped
    assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_cancelled")
    assert final.failure_reason == "cancelled by request"
    assert not group_alive(pgid) and not pid_alive(pids["worker"]) and not pid_alive(pids["grandchild"])
    with pytest.raises(MosaicError, match="already ended"):
        client.cancel(daemon.address, run_id)
    with pytest.raises(MosaicError, match="NOT_FOUND"):
        client.cancel(daemon.address, "no-such-run")


def test_cancel_a_worker_that_ignores_sigterm(daemon):
    fake = {"duration": 120, "grandchild": True, "ignore_sigterm": True}
    run_id = client.submit(daemon.address, fake_config(fake)).run_id
    wait_for(lambda: record(daemon.address, run_id).status == pb.RUN_STATUS_EXEC, what="run_started")
    pids = _pids(record(daemon.address, run_id).run_dir)
    client.cancel(daemon.address, run_id)
    final = wait_final(daemon.address, run_id)
    assert final.terminal_event == "run_cancelled" and final.exit_code == -9
    assert not pid_alive(pids["worker"]) and not pid_alive(pids["grandchild"])


def test_heartbeat_timeout_fails_and_stops_a_silent_run(start_daemon):
    daemon = start_daemon(heartbeat_timeout=1.0)
    fake = {"duration": 120, "heartbeats": False, "grandchild": True}
    run_id = client.submit(daemon.address, fake_config(fake)).run_id
    final = wait_final(daemon.address, run_id)
    assert (final.status, final.terminal_event) == (pb.RUN_STATUS_FAULT, "run_failed")
    assert "no heartbeat for" in final.failure_reason and "heartbeat timeout 1 s" in final.failure_reason
    pids = _pids(final.run_dir)
    pgid = daemon.store.get(run_id).pgid
    wait_for(lambda: not group_alive(pgid) and not pid_alive(pids["grandchild"]), what="the run's processes to go")
    # A run that heartbeats is not touched by the watchdog.
    alive = client.submit(daemon.address, fake_config({"duration": 2.5})).run_id
    assert wait_final(daemon.address, alive).terminal_event == "run_completed"


def test_queue_bounds_concurrent_runs(start_daemon):
    daemon = start_daemon(max_concurrent=2)
    seen_active: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        active: set[str] = set()
        for rec in client.watch_runs(daemon.address, timeout=60):
            (active.add if rec.status in ACTIVE else active.discard)(rec.run_id)
            seen_active.append(len(active))
            if stop.is_set():
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    run_ids = [client.submit(daemon.address, fake_config({"duration": 0.5})).run_id for _ in range(5)]
    health = client.health(daemon.address)
    assert health.max_concurrent == 2 and health.running <= 2 and health.running + health.queued >= 3
    for run_id in run_ids:
        assert wait_final(daemon.address, run_id).terminal_event == "run_completed"
    stop.set()
    assert max(seen_active) == 2


def test_cancel_a_queued_run(start_daemon):
    daemon = start_daemon(max_concurrent=1)
    first = client.submit(daemon.address, fake_config({"duration": 120})).run_id
    queued = client.submit(daemon.address, fake_config({"duration": 120})).run_id
    assert record(daemon.address, queued).status == pb.RUN_STATUS_INIT
    # A queued run's process has no registration secret yet: refused on metadata, like any run id.
    with pytest.raises(MosaicError, match="UNAUTHENTICATED: a first RegisterWorker needs the registration secret"):
        client.RunSession.register(daemon.address, run_id=queued)
    client.cancel(daemon.address, queued)
    final = record(daemon.address, queued)
    assert final.terminal_event == "run_cancelled" and "before it started" in final.failure_reason
    client.cancel(daemon.address, first)


def test_watch_runs_since_seq_and_filter(daemon):
    run_id = client.submit(daemon.address, fake_config({"duration": 0.1})).run_id
    final = wait_final(daemon.address, run_id)
    history = []
    for rec in client.watch_runs(daemon.address, timeout=1.0):
        history.append(rec)
    assert history[-1].seq_id == final.seq_id
    statuses = [r.status for r in client.watch_runs(daemon.address, since_seq=0, timeout=1.0)]
    assert statuses[-1] == pb.RUN_STATUS_TERM
    only_term = list(client.watch_runs(daemon.address, [pb.RUN_STATUS_TERM], timeout=1.0))
    assert [r.run_id for r in only_term] == [run_id]
    assert list(client.watch_runs(daemon.address, since_seq=final.seq_id, timeout=1.0)) == []


@pytest.mark.parametrize(
    "text, code, message",
    [
        (
            "{not json",
            "INVALID_ARGUMENT",
            "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        (
            '{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 0}',
            "INVALID_ARGUMENT",
            "field 'total_timesteps'",
        ),
        (
            '{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 5, "worker": "ghost"}',
            "INVALID_ARGUMENT",
            "unknown worker 'ghost'; installed workers: ",
        ),
        (
            '{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 5, "extras": {"cuda": true}}',
            "FAILED_PRECONDITION",
            "extras.cuda asks for a GPU and this host has none",
        ),
    ],
)
def test_bad_submissions_refused(daemon, text, code, message):
    with pytest.raises(MosaicError) as info:
        client.submit(daemon.address, text)
    assert f"{code}: " in str(info.value) and message in str(info.value)
    assert client.list_runs(daemon.address) == []


def test_health_and_workers(daemon):
    health = client.health(daemon.address)
    assert health.healthy and health.accepting and health.listen_address == daemon.address
    workers = {w.name: w for w in client.list_workers(daemon.address, refresh=True)}
    assert workers["cleanrl"].status == "active"
    assert json.loads(workers["cleanrl"].metadata_json)["capabilities"]["worker_type"] == "cleanrl"


def test_shutdown_refuses_new_runs_and_cancels_running(start_daemon):
    daemon = start_daemon()
    run_id = client.submit(daemon.address, fake_config({"duration": 120})).run_id
    wait_for(lambda: record(daemon.address, run_id).status == pb.RUN_STATUS_EXEC, what="run_started")
    stopper = threading.Thread(target=daemon.stop)
    stopper.start()
    wait_for(lambda: not daemon.manager.accepting, what="draining")
    try:
        client.submit(daemon.address, fake_config())
    except MosaicError as exc:  # refused while draining, or the server is already gone
        assert "UNAVAILABLE" in str(exc)
    stopper.join()
    assert not (daemon.state_dir / "daemon.json").exists()
    store = RunStore(daemon.state_dir / "trainer.sqlite3")
    row = store.get(run_id)
    store.close()
    assert (row.status, row.terminal_event, row.failure_reason) == (TERM, "run_cancelled", "daemon shutting down")
    assert not group_alive(row.pgid)
