"""`mosaic sweep run SPEC --ray-address`: the seeds' `mosaic run` go to the cluster, trials on
both nodes, the study in Optuna storage here. Each run asks for 2 CPUs (a whole node), so two
trials at a time must use both nodes. The job is the bundled ppo with a tiny budget."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env, processes_of

optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")

SPEC = """
study_name = "ray-sweep"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 1024
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


def test_a_four_trial_sweep_lands_on_both_nodes(cluster, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    runs = tmp_path / "runs"
    done = subprocess.run([str(BIN / "mosaic"), "sweep", "run", str(spec), "--storage", storage, "--workers", "2",
                           "--runs-dir", str(runs), "--ray-address", cluster.address, "--ray-num-cpus", "2"],
                          cwd=tmp_path, env=caller_env(cluster), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    study = optuna.load_study(study_name="ray-sweep", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 4, [t.state for t in study.trials]
    nodes = set()
    for run_dir in runs.iterdir():
        manifest = json.loads((run_dir / "analytics.json").read_text())
        assert manifest["status"] == "completed"
        nodes.add(manifest["ray"]["node_id"])
        assert not processes_of(run_dir.name)
    assert nodes == {cluster.node_ids["nodeA"], cluster.node_ids["nodeB"]}
