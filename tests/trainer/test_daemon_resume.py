"""Resume through the daemon: a cancelled bundled-PPO run submitted again with its run_id continues
from its checkpoint (``mosaic daemon`` → ``mosaic run --grpc --run-id``), one history, the budget reached;
a completed run submitted again stays refused and untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mosaic_core.errors import UsageError
from mosaic_core.events import metric_steps, one_history, read_events
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb

from .conftest import record, wait_final, wait_for

BUDGET = 6400  # 50 iterations of 2 envs x 64 steps
PPO = {
    "worker": "cleanrl",
    "algo": "ppo",
    "env_id": "CartPole-v1",
    "total_timesteps": BUDGET,
    "extras": {"algo_params": {"num_envs": 2, "num_steps": 64}},
}


def test_a_cancelled_run_submitted_again_resumes(daemon_process, tmp_path):
    daemon = daemon_process(
        "--state-dir", str(tmp_path / "state"), "--heartbeat-timeout", "30", "--grace-period", "30", mosaic=True
    )
    run_id = client.submit(daemon.target, json.dumps(PPO), run_id="ppo-resumed").run_id
    run_dir = Path(
        wait_for(
            lambda: (r := record(daemon.target, run_id)).status == pb.RUN_STATUS_EXEC and r.run_dir,
            timeout=240,
            what="the run to start",
        )
    )
    events_path = run_dir / "events.jsonl"
    wait_for(
        lambda: any(s >= BUDGET // 4 for s in metric_steps(read_events(events_path))) or None,
        timeout=240,
        what="a quarter of the budget",
    )
    client.cancel(daemon.target, run_id, timeout=60)
    cancelled = record(daemon.target, run_id)
    assert (cancelled.status, cancelled.terminal_event) == (pb.RUN_STATUS_TERM, "run_cancelled")
    end = read_events(events_path)[-1]
    assert end["event"] == "run_cancelled" and end["payload"]["resumable"] is True, end
    from_step = end["payload"]["from_step"]
    assert 0 < from_step < BUDGET

    again = client.submit(daemon.target, json.dumps(PPO), run_id=run_id)
    assert again.run_id == run_id
    final = wait_final(daemon.target, run_id, timeout=300)
    assert (final.status, final.terminal_event, final.exit_code) == (pb.RUN_STATUS_TERM, "run_completed", 0), (
        final.failure_reason
    )
    assert Path(final.run_dir) == run_dir
    events = read_events(events_path)
    marks = [e["payload"] for e in events if e["event"] == "run_resumed"]
    assert len(marks) == 1 and marks[0]["from_step"] == from_step and marks[0]["attempt"] == 1
    steps = metric_steps(one_history(events))
    assert all(a <= b for a, b in zip(steps, steps[1:])), steps  # never back
    assert BUDGET * 0.9 <= max(steps) <= BUDGET
    assert f"run {run_id}: resubmitted; it resumes" in daemon.log()

    # Completed: a third submission is refused, and the run is left as it is.
    log = events_path.read_bytes()
    with pytest.raises(UsageError, match="ALREADY_EXISTS"):
        client.submit(daemon.target, json.dumps(PPO), run_id=run_id)
    assert events_path.read_bytes() == log and record(daemon.target, run_id).terminal_event == "run_completed"


def test_a_resubmission_of_another_algorithm_is_refused(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"), "--heartbeat-timeout", "30", mosaic=True)
    run_id = client.submit(daemon.target, json.dumps({**PPO, "total_timesteps": 50_000_000}), run_id="ppo-other").run_id
    wait_for(lambda: record(daemon.target, run_id).status == pb.RUN_STATUS_EXEC, timeout=240, what="the run to start")
    client.cancel(daemon.target, run_id, timeout=60)
    with pytest.raises(UsageError, match="INVALID_ARGUMENT: run ppo-other has algo 'ppo', not 'dqn'"):
        client.submit(daemon.target, json.dumps({**PPO, "algo": "dqn"}), run_id=run_id)
    assert record(daemon.target, run_id).terminal_event == "run_cancelled"
