"""Batches on the real Slurm cluster: the daemon dispatching a submission as a Slurm job, --detach
refused where runs are followed. (A 4-trial sweep as one job array: the launcher contract,
test_slurm_contract.py.)"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time

import pytest

from mosaic_core.testing.launcher_suite import sweep_spec
from tests.conftest import BIN
from tests.slurm.test_slurm_run import processes_of


def test_the_daemon_dispatches_a_submission_as_a_slurm_job(slurm, no_jobs_left, tmp_path):
    state = tmp_path / "daemon"
    err = tempfile.TemporaryFile("w+")
    daemon = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(state),
            "--launcher",
            "slurm",
            "--slurm-partition",
            "debug",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    try:
        ready = json.loads(daemon.stdout.readline())
        target = ready["listen_address"]
        config = tmp_path / "job.json"
        config.write_text(json.dumps({"worker": "example", "env_id": "CartPole-v1", "total_timesteps": 3000}))
        submit = subprocess.run(
            [str(BIN / "mosaic"), "submit", str(config), "--target", target, "--state-dir", str(state)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert submit.returncode == 0, submit.stderr
        deadline, rows = time.monotonic() + 300, []
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [str(BIN / "mosaic"), "runs", "--target", target, "--state-dir", str(state), "--json"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )
            rows = json.loads(listed.stdout or "[]")
            if rows and rows[0]["terminal_event"]:
                break
            time.sleep(1)
        assert rows and rows[0]["terminal_event"] == "run_completed", (rows, open_log(err))
        assert rows[0]["node"] and rows[0]["node"].startswith("slurm job "), rows[0]
        assert "runs execute through the 'slurm' launcher" in open_log(err)
        assert not processes_of(rows[0]["run_id"])
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        daemon.stdout.close()
        err.close()


def open_log(err) -> str:
    err.seek(0)
    return err.read()[-3000:]


@pytest.mark.parametrize("command", [["sweep", "run", "spec.toml"], ["daemon", "--listen", "127.0.0.1:0"]])
def test_detach_is_refused_where_the_runs_are_followed(slurm, no_jobs_left, tmp_path, command):
    (tmp_path / "spec.toml").write_text(sweep_spec("slurm-sweep"), encoding="utf-8")
    done = subprocess.run(
        [str(BIN / "mosaic"), *command, "--launcher", "slurm", "--detach"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--detach is for `mosaic run`, not "
            f"`mosaic {command[0]}{' run' if command[0] == 'sweep' else ''}`"
            " (it follows its runs)"
        )
    ), done.stderr
