"""Batches on the real Slurm cluster: a 4-trial sweep as one job array (%2 at a time), and the
daemon dispatching a submission as a Slurm job. The job is the bundled ppo with a tiny budget."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time

import pytest

from tests.conftest import BIN
from tests.slurm.test_slurm_run import processes_of

optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")

SPEC = """
study_name = "slurm-sweep"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 512
seeds = 1
max_trials = 4

[objective]
metric = "charts/episodic_return"
last_n = 5

[sampler]
type = "random"
seed = 0

[pruner]
type = "none"

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""


def test_a_four_trial_sweep_runs_as_one_job_array(slurm, no_jobs_left, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    runs = tmp_path / "runs"
    done = subprocess.run(
        [
            str(BIN / "mosaic"),
            "sweep",
            "run",
            str(spec),
            "--storage",
            storage,
            "--runs-dir",
            str(runs),
            "--launcher",
            "slurm",
            "--slurm-array-limit",
            "2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"4 commands as Slurm job array (\d+) \(0-3%2\)", done.stderr)
    assert found, done.stderr[-3000:]
    array = found.group(1)
    study = optuna.load_study(study_name="slurm-sweep", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 4, [t.state for t in study.trials]
    run_dirs = [p for p in runs.iterdir() if not p.name.startswith(".")]  # .jobs/ holds the array's files
    assert len(run_dirs) == 4
    for run_dir in run_dirs:
        assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
        assert not processes_of(run_dir.name)
    (folder,) = (runs / ".jobs").iterdir()
    assert sorted(p.name for p in folder.glob("task-*.rc")) == [f"task-{i}.rc" for i in range(4)]
    assert len(list(folder.glob(f"task-{array}_*.out"))) == 4  # each trial was a task of the one array
    assert (folder / "spec.toml").read_text() == SPEC  # the tasks' own copy of the spec


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
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
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
