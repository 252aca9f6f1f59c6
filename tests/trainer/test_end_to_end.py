"""Through the real path: ``mosaic daemon`` → ``mosaic run --grpc`` → a bundled PPO run."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from mosaic_core.events import read_events
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.processes import group_alive

from .conftest import pid_alive, record, wait_final, wait_for

PPO = {"algo": "ppo", "env_id": "CartPole-v1", "extras": {"algo_params": {"num_envs": 2, "num_steps": 64}}}


def _processes_in(directory: str) -> list[int]:
    """Live processes working in ``directory`` (the training process and its env processes)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if (cwd == directory or cwd.startswith(directory + os.sep)) and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def _host_of(config_path: str) -> int | None:
    """The ``mosaic run`` process started for a config (the run's process-group leader)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if config_path.encode() in argv and b"run" in argv:
            return int(entry)
    return None


def test_tiny_ppo_run_through_the_daemon(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"), "--heartbeat-timeout", "30", mosaic=True)
    statuses: list[int] = []
    watcher = threading.Thread(
        target=lambda: statuses.extend(r.status for r in client.watch_runs(daemon.target, timeout=240)), daemon=True
    )
    watcher.start()
    run_id = client.submit(daemon.target, json.dumps({**PPO, "total_timesteps": 2000})).run_id
    final = wait_final(daemon.target, run_id, timeout=240)
    assert (final.status, final.terminal_event, final.exit_code) == (pb.RUN_STATUS_TERM, "run_completed", 0), (
        final.failure_reason
    )
    wait_for(lambda: pb.RUN_STATUS_TERM in statuses, what="WatchRuns to see the end")
    # The run's records in the order they changed, never an older state after a newer one (a state
    # shorter than one read of the stream, RDY before the first step, may be passed over: docs/daemon.md)
    lifecycle = [pb.RUN_STATUS_INIT, pb.RUN_STATUS_HSHK, pb.RUN_STATUS_RDY, pb.RUN_STATUS_EXEC, pb.RUN_STATUS_TERM]
    ranks = [lifecycle.index(status) for status in statuses]
    assert ranks == sorted(ranks) and statuses[-1] == pb.RUN_STATUS_TERM, statuses
    events = read_events(Path(final.run_dir) / "events.jsonl")
    assert [e["event"] for e in events][0] == "run_started" and events[-1]["event"] == "run_completed"
    assert events[0]["payload"]["grpc"]["accepted_version"] == "MOSAIC/1.0"
    assert (Path(final.run_dir) / "manifest.json").exists()
    log = daemon.log()
    assert f"run {run_id}: started (cleanrl, pid " in log and f"run {run_id}: run_completed (exit code 0)" in log


def test_cancel_a_real_run_leaves_no_process(daemon_process, tmp_path):
    # heartbeat every 1 s (timeout / 3): the worker's gRPC heartbeats show up quickly.
    daemon = daemon_process(
        "--state-dir", str(tmp_path / "state"), "--heartbeat-timeout", "3", "--grace-period", "5", mosaic=True
    )
    run_id = client.submit(daemon.target, json.dumps({**PPO, "total_timesteps": 50_000_000})).run_id
    run_dir = wait_for(
        lambda: (r := record(daemon.target, run_id)).status == pb.RUN_STATUS_EXEC and r.run_dir,
        timeout=120,
        what="the run to start",
    )
    events_path = Path(run_dir) / "events.jsonl"
    beat = wait_for(
        lambda: next((e for e in read_events(events_path) if e["event"] == "heartbeat"), None),
        timeout=120,
        what="a heartbeat",
    )
    assert beat["payload"]["grpc_heartbeat"] == {"ok": True}
    training = wait_for(lambda: _processes_in(run_dir), what="the training process")
    host = _host_of(str(tmp_path / "state" / "configs" / f"{run_id}.json"))
    assert host is not None and group_alive(host)
    client.cancel(daemon.target, run_id, timeout=60)
    final = record(daemon.target, run_id)
    assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_cancelled")
    assert not any(pid_alive(p) for p in training) and _processes_in(run_dir) == []
    assert read_events(events_path)[-1]["event"] == "run_cancelled"
    assert not group_alive(host)


def test_a_killed_daemon_takes_its_real_run_down_and_the_restart_records_how(daemon_process, tmp_path):
    import signal

    from mosaic_core.trainer.recovery import RESTART_REASON

    state = tmp_path / "state"
    first = daemon_process("--state-dir", str(state), "--grace-period", "5", mosaic=True)
    run_id = client.submit(first.target, json.dumps({**PPO, "total_timesteps": 50_000_000})).run_id
    run_dir = wait_for(
        lambda: (r := record(first.target, run_id)).status == pb.RUN_STATUS_EXEC and r.run_dir,
        timeout=120,
        what="the run to start",
    )
    training = wait_for(lambda: _processes_in(run_dir), what="the training process")
    host = _host_of(str(state / "configs" / f"{run_id}.json"))
    assert host is not None
    os.kill(first.pid, signal.SIGKILL)
    first.proc.wait()
    # The parent-death signal: `mosaic run` cancels its training process and ends the run itself.
    wait_for(
        lambda: not pid_alive(host) and not any(pid_alive(p) for p in training),
        timeout=60,
        what="the orphaned run to stop",
    )
    assert read_events(Path(run_dir) / "events.jsonl")[-1]["event"] == "run_cancelled"
    second = daemon_process("--state-dir", str(state), mosaic=True)
    final = wait_final(second.target, run_id)
    assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_cancelled")
    assert final.failure_reason.startswith(f"{RESTART_REASON}; the run was cancelled: ")
