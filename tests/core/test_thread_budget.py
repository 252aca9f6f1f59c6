"""Thread budgets: each run's training process gets OMP_NUM_THREADS (and MKL's, OpenBLAS's,
numexpr's) from the CPUs it may use — ``--num-cpus``, a launcher's share (the daemon's
``--max-concurrent``, the sweep's ``--workers``), else one thread (a lone run) — the user's own
``OMP_NUM_THREADS`` winning; ``launch.json`` records it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mosaic_core.threads import THREAD_VARS, usable_cpus
from tests.conftest import BIN, run_cli

RUN = ["run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "300"]


def _summary(workdir: Path, *args: str, env: dict | None = None) -> dict:
    done = run_cli([*RUN, "--dry-run", "--emit-summary", *args], cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_budget_comes_from_num_cpus_else_one_thread_and_the_users_own_setting_wins(workdir):
    plain = _summary(workdir)
    assert plain["threads"] == {"threads": 1, "source": "lone run"}
    assert all(plain["env"][name] == "1" for name in THREAD_VARS)
    three = _summary(workdir, "--num-cpus", "3")
    assert three["threads"] == {"threads": 3, "source": "--num-cpus"} and three["env"]["OMP_NUM_THREADS"] == "3"
    shared = _summary(workdir, env={"MOSAIC_CPU_SHARE": "2"})
    assert shared["threads"] == {"threads": 2, "source": "MOSAIC_CPU_SHARE"}
    own = _summary(workdir, "--num-cpus", "3", env={"OMP_NUM_THREADS": "5"})
    assert own["threads"] == {"threads": 5, "source": "OMP_NUM_THREADS"}
    assert "OMP_NUM_THREADS" not in own["env"] and own["env"]["MKL_NUM_THREADS"] == "5"  # the user's is inherited


def test_a_bad_num_cpus_is_one_line(workdir, runs_root):
    done = run_cli([*RUN, "--num-cpus", "0"], cwd=workdir)
    assert done.returncode == 2 and done.stderr.strip() == "mosaic: error: --num-cpus must be at least 1, got 0"
    assert not runs_root.exists()


def test_the_training_process_runs_with_its_budget_and_launch_json_records_it(workdir, runs_root):
    done = run_cli([*RUN, "--num-cpus", "1", "--run-id", "t1"], cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "OMP_NUM_THREADS=1" in (runs_root / "t1" / "logs" / "example.stderr.log").read_text()
    assert json.loads((runs_root / "t1" / "launch.json").read_text())["threads"] == {
        "threads": 1,
        "source": "--num-cpus",
    }


def test_the_daemon_gives_each_run_its_share_of_the_cpus(tmp_path):
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb
    from tests.trainer.conftest import DaemonProcess, wait_final

    daemon = DaemonProcess(
        [
            str(BIN / "mosaic"),
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--max-concurrent",
            "2",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        tmp_path,
    )
    try:
        config = {"worker": "example", "env_id": "CartPole-v1", "total_timesteps": 300}
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=120, token=daemon.token)
        assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_completed"), final.failure_reason
        share = max(1, usable_cpus() // 2)
        if "OMP_NUM_THREADS" not in os.environ:
            launch = json.loads((Path(final.run_dir) / "launch.json").read_text())
            assert launch["threads"] == {"threads": share, "source": "MOSAIC_CPU_SHARE"}
            said = (Path(final.run_dir) / "logs" / "example.stderr.log").read_text()
            assert f"OMP_NUM_THREADS={share}" in said
    finally:
        daemon.stop()
