"""Issue 19: the daemon's clean-up stops exactly the processes it started (never a process that
merely works in a run directory, another user's included); a W&B key submitted to it reaches
the training process's environment and is never written in clear in the state dir nor shown
on any command line."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
from pathlib import Path

from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb

from .conftest import fake_config, pid_alive, record, wait_final, wait_for
from .second_user import AS_NOBODY, SETPRIV

PPO = {
    "algo": "ppo",
    "env_id": "CartPole-v1",
    "total_timesteps": 50_000_000,
    "extras": {"algo_params": {"num_envs": 1, "num_steps": 64}},
}


def _pids(run_dir: str) -> dict[str, int]:
    path = Path(run_dir) / "pids.json"
    return wait_for(lambda: path.exists() and path.read_text() and json.loads(path.read_text()), what="pids.json")


def _bystanders(run_dir: str) -> list[subprocess.Popen]:
    """Processes the daemon did not start, working in the run directory: ours, and another
    user's when we can act as one."""
    sleep = ["sleep", "600"]
    started = [subprocess.Popen(sleep, cwd=run_dir)]
    if os.geteuid() == 0 and SETPRIV:
        started.append(subprocess.Popen([*AS_NOBODY, *sleep], cwd=run_dir))
    return started


def test_clean_up_stops_what_the_daemon_started_and_nothing_else(daemon):
    run_id = client.submit(
        daemon.address, fake_config({"duration": 120, "grandchild": True, "ignore_sigterm": True})
    ).run_id
    wait_for(lambda: record(daemon.address, run_id).status == pb.RUN_STATUS_EXEC, what="the run to start")
    run_dir = record(daemon.address, run_id).run_dir
    pids = _pids(run_dir)
    bystanders = _bystanders(run_dir)
    quick = client.submit(daemon.address, fake_config({"duration": 1.0})).run_id
    wait_for(lambda: record(daemon.address, quick).status == pb.RUN_STATUS_EXEC, what="the second run to start")
    bystanders += _bystanders(record(daemon.address, quick).run_dir)
    try:
        client.cancel(daemon.address, run_id)  # its worker ignores SIGTERM: killed, its grandchild orphaned
        assert wait_final(daemon.address, run_id).exit_code == -signal.SIGKILL
        assert wait_final(daemon.address, quick).terminal_event == "run_completed"
        wait_for(
            lambda: not pid_alive(pids["worker"]) and not pid_alive(pids["grandchild"]),
            what="the run's own processes to be stopped",
        )
        assert [b.poll() for b in bystanders] == [None] * len(bystanders)
    finally:
        for process in bystanders:
            process.kill()
            process.wait()


def test_a_wandb_key_reaches_the_run_and_never_the_state_dir(daemon_process, tmp_path):
    state = tmp_path / "state"
    daemon = daemon_process("--state-dir", str(state), mosaic=True)
    key = "sekrit-" + secrets.token_hex(16)
    config = {**PPO, "extras": {**PPO["extras"], "wandb_api_key": key}}
    run_id = client.submit(daemon.target, json.dumps(config)).run_id
    wait_for(lambda: record(daemon.target, run_id).status == pb.RUN_STATUS_EXEC, timeout=120, what="the run to start")
    wanted = f"WANDB_API_KEY={key}".encode()

    def environ_with_key() -> bool:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if wanted in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    return True
            except OSError:
                continue
        return False

    wait_for(environ_with_key, timeout=120, what="the training process to get the key in its environment")
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            assert key.encode() not in Path(f"/proc/{entry}/cmdline").read_bytes(), entry
        except OSError:
            continue
    client.cancel(daemon.target, run_id, timeout=60)
    assert record(daemon.target, run_id).terminal_event == "run_cancelled"
    leaks = [str(p) for p in state.rglob("*") if p.is_file() and not p.is_symlink() and key.encode() in p.read_bytes()]
    assert leaks == []
    stored = json.loads((state / "configs" / f"{run_id}.json").read_text())
    assert stored["extras"]["wandb_api_key"] == "***"
