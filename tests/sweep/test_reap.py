"""Optuna 5's journal storage has no heartbeats: a worker re-queues the RUNNING trials of dead
workers on its own host (checked against a real journal file and a real, finished process)."""

from __future__ import annotations

import os
import socket
import subprocess

from tests.sweep.conftest import optuna

from mosaic_sweep.storage import open_storage, resolve
from mosaic_sweep.worker import reap_dead_local_trials

TrialState = optuna.trial.TrialState


def test_a_dead_local_workers_trial_is_failed_and_requeued(tmp_path):
    storage = open_storage(resolve(f"journal:{tmp_path}/s.journal", "s"))
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    dead.set_user_attr("worker", f"{socket.gethostname()}:{gone.pid}")
    alive = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    alive.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
    remote = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
    remote.set_user_attr("worker", f"another-host:{gone.pid}")
    reap_dead_local_trials(study, max_retries=1)
    trials = optuna.load_study(study_name="s", storage=storage).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.RUNNING, TrialState.RUNNING, TrialState.WAITING]
    assert trials[3].params == trials[0].params and trials[3].system_attrs["failed_trial"] == 0
