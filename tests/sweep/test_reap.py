"""Optuna 5's journal storage has no heartbeats: a sweep process re-queues the RUNNING trials of
dead sweep processes on its own host (checked against a real journal file and a real, finished process)."""

from __future__ import annotations

import os
import socket
import subprocess

from mosaic_sweep.loop import reap_dead_local_trials
from mosaic_sweep.storage import open_storage, resolve
from tests.sweep.conftest import optuna

TrialState = optuna.trial.TrialState


def test_a_dead_local_sweep_process_trial_is_failed_and_requeued(tmp_path):
    storage = open_storage(resolve(f"journal:{tmp_path}/s.journal", "s"))
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    dead.set_user_attr("worker", f"{socket.gethostname()}:{gone.pid}")  # a study made before the rename
    alive = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    alive.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")
    remote = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    remote.set_user_attr("process", f"another-host:{gone.pid}")
    reap_dead_local_trials(study, max_retries=1)
    trials = optuna.load_study(study_name="s", storage=storage).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.RUNNING, TrialState.RUNNING, TrialState.WAITING]
    assert trials[3].params == trials[0].params and trials[3].system_attrs["failed_trial"] == 0


RACE = """
import sys, time
from mosaic_sweep.spec import parse_spec
from mosaic_sweep.storage import open_storage, resolve
from mosaic_sweep.study import open_study
spec = parse_spec({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 9, "study_name": "race"})
location = resolve("sqlite:///race.db", "race")
start = float(sys.argv[1])
while time.time() < start:
    pass
open_study(spec, open_storage(location, heartbeat_s=5), create=True, shown_url=location.shown)
print("ok")
"""


def test_sweep_processes_creating_one_fresh_sqlite_study_at_once_all_succeed(tmp_path):
    """Plain Optuna crashes here with `table studies already exists`; sweep processes retry instead."""
    import sys
    import time

    start = str(time.time() + 3)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, start], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, results
    assert len(optuna.get_all_study_summaries(f"sqlite:///{tmp_path}/race.db")) == 1
