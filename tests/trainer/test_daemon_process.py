"""The daemon as its own process: SIGKILL and restart, SIGTERM, one daemon per state dir,
the CLI's errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.processes import group_alive
from mosaic_core.trainer.recovery import RESTART_REASON

from .conftest import fake_config, pid_alive, record, wait_final, wait_for


def _running(target: str, fake: dict) -> tuple[str, dict]:
    run_id = client.submit(target, fake_config(fake)).run_id
    wait_for(lambda: record(target, run_id).status == pb.RUN_STATUS_EXEC, what="run_started")
    rec = record(target, run_id)
    path = os.path.join(rec.run_dir, "pids.json")
    pids = wait_for(lambda: os.path.exists(path) and json.loads(open(path).read() or "null"), what="pids.json")
    return run_id, pids


def test_daemon_killed_and_restarted_keeps_state(daemon_process, tmp_path):
    state = str(tmp_path / "state")
    first = daemon_process("--state-dir", state, "--max-concurrent", "1")
    done = client.submit(first.target, fake_config({"duration": 0.1})).run_id
    wait_final(first.target, done)
    interrupted, pids = _running(first.target, {"duration": 300, "grandchild": True})
    queued = client.submit(first.target, fake_config({"duration": 0.1})).run_id
    assert record(first.target, queued).status == pb.RUN_STATUS_INIT

    os.kill(first.pid, signal.SIGKILL)
    first.proc.wait()
    # Its run is not left unsupervised: the parent-death signal makes it cancel itself.
    wait_for(
        lambda: not pid_alive(pids["worker"]) and not pid_alive(pids["grandchild"]),
        timeout=30,
        what="the orphaned run to stop itself",
    )

    second = daemon_process("--state-dir", state, "--max-concurrent", "1")
    runs = {r.run_id: r for r in client.list_runs(second.target)}
    assert runs[done].terminal_event == "run_completed"
    # Its own events.jsonl says how it ended.
    assert (runs[interrupted].status, runs[interrupted].terminal_event) == (pb.RUN_STATUS_TERM, "run_cancelled")
    assert runs[interrupted].failure_reason == f"{RESTART_REASON}; the run was cancelled: received SIGTERM"
    assert wait_final(second.target, queued).terminal_event == "run_completed"
    assert second.stop() == 0


def test_a_run_that_completed_while_its_daemon_was_dead_is_recorded_completed(daemon_process, tmp_path):
    state = str(tmp_path / "state")
    first = daemon_process("--state-dir", state)
    run_id, pids = _running(first.target, {"duration": 3, "ignore_sigterm": True})
    silent, silent_pids = _running(first.target, {"duration": 3, "ignore_sigterm": True, "terminal": False})
    os.kill(first.pid, signal.SIGKILL)
    first.proc.wait()
    wait_for(
        lambda: not pid_alive(pids["worker"]) and not pid_alive(silent_pids["worker"]),
        what="the runs to finish on their own",
    )
    second = daemon_process("--state-dir", state)
    completed, unknown = record(second.target, run_id), record(second.target, silent)
    assert (completed.status, completed.terminal_event) == (pb.RUN_STATUS_TERM, "run_completed")
    assert not completed.HasField("failure_reason")
    assert (unknown.status, unknown.failure_reason) == (pb.RUN_STATUS_FAULT, RESTART_REASON)


def test_sigterm_cancels_runs_and_exits_cleanly(daemon_process, tmp_path):
    state = tmp_path / "state"
    daemon = daemon_process("--state-dir", str(state))
    run_id, pids = _running(daemon.target, {"duration": 300, "grandchild": True})
    pgid = pids["worker"]
    assert daemon.stop() == 0
    assert not group_alive(pgid) and not pid_alive(pids["grandchild"])
    assert not (state / "daemon.json").exists()
    # Everything it wrote is under the state dir.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    again = daemon_process("--state-dir", str(state))
    rec = record(again.target, run_id)
    assert (rec.status, rec.terminal_event, rec.failure_reason) == (
        pb.RUN_STATUS_TERM,
        "run_cancelled",
        "daemon shutting down",
    )


def test_on_shutdown_wait_lets_runs_finish(daemon_process, tmp_path):
    state = tmp_path / "state"
    daemon = daemon_process("--state-dir", str(state), "--on-shutdown", "wait")
    run_id, _ = _running(daemon.target, {"duration": 1.5})
    assert daemon.stop() == 0
    again = daemon_process("--state-dir", str(state))
    assert record(again.target, run_id).terminal_event == "run_completed"


def test_one_daemon_per_state_dir(daemon_process, mosaic, tmp_path):
    state = str(tmp_path / "state")
    daemon_process("--state-dir", state)
    result = mosaic("daemon", "--listen", "127.0.0.1:0", "--state-dir", state, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("mosaic: error: another trainer daemon (pid ")
    assert "Traceback" not in result.stderr
    result = mosaic("daemon", "--listen", "127.0.0.1:0", "--state-dir", "/proc/no-such-dir", timeout=60)
    assert result.returncode == 1 and "cannot use the state dir /proc/no-such-dir" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["daemon", "--listen", "localhost"], "--listen must look like HOST:PORT"),
        (["daemon", "--max-concurrent", "0"], "--max-concurrent must be at least 1"),
        (["daemon", "--allow-scripts", "scripts"], "--allow-scripts scripts: not an absolute path to a directory"),
        (["submit", "missing.json"], "cannot read the config"),
        (["cancel", "r1", "--target", "nowhere"], "--target must look like HOST:PORT"),
    ],
)
def test_cli_usage_errors(mosaic, workdir, args, message):
    result = mosaic(*args, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert list(workdir.iterdir()) == []


def test_cli_submit_errors(mosaic, workdir, daemon_process):
    (workdir / "bad.json").write_text("{oops")
    result = mosaic("submit", "bad.json", timeout=60)
    assert result.returncode == 2 and "malformed JSON at line 1 column 2: " in result.stderr
    assert result.stderr.rstrip().endswith("(file bad.json)")
    (workdir / "w.json").write_text(json.dumps({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 0}))
    daemon = daemon_process("--state-dir", str(workdir / "state"))
    result = mosaic("submit", "w.json", "--target", daemon.target, timeout=60)
    assert result.returncode == 2
    assert "refused SubmitRun: INVALID_ARGUMENT: total_timesteps must be an integer > 0" in result.stderr
    os.kill(daemon.proc.pid, signal.SIGSTOP)  # there but not answering: busy or stuck, not absent
    try:
        result = mosaic("submit", "w.json", "--target", daemon.target, timeout=60)
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"the trainer daemon at {daemon.target} did not answer SubmitRun before its deadline" in result.stderr
    assert "busy or stuck, not absent" in result.stderr
    daemon.stop()
    result = mosaic("submit", "w.json", "--target", daemon.target, timeout=60)
    assert result.returncode == 1 and f"no trainer daemon answered at {daemon.target}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_submit_and_cancel(mosaic, workdir, daemon_process):
    daemon = daemon_process("--state-dir", str(workdir / "state"))
    (workdir / "w.json").write_text(fake_config({"duration": 300}))
    result = mosaic("submit", "w.json", "--target", daemon.target, "--run-id", "cli-run", timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run_id"] == "cli-run"
    wait_for(lambda: record(daemon.target, "cli-run").status == pb.RUN_STATUS_EXEC, what="run_started")
    result = mosaic("cancel", "cli-run", "--target", daemon.target, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["terminal_event"] == "run_cancelled"
    result = mosaic("cancel", "cli-run", "--target", daemon.target, timeout=60)
    assert result.returncode == 1 and "already ended (run_cancelled)" in result.stderr


def test_cli_start_up_does_not_import_grpc():
    code = (
        "import sys; import mosaic_core.trainer.commands; "
        "assert not {'grpc', 'google.protobuf'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
