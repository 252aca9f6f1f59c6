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
    done = subprocess.run(
        [
            str(BIN / "mosaic"),
            "sweep",
            "run",
            str(spec),
            "--storage",
            storage,
            "--parallel",
            "2",
            "--runs-dir",
            str(runs),
            "--ray-address",
            cluster.address,
            "--ray-num-cpus",
            "2",
        ],
        cwd=tmp_path,
        env=caller_env(cluster),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    study = optuna.load_study(study_name="ray-sweep", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 4, [t.state for t in study.trials]
    nodes = set()
    for run_dir in runs.iterdir():
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "completed"
        nodes.add(manifest["ray"]["node_id"])
        assert not processes_of(run_dir.name)
    assert nodes == {cluster.node_ids["nodeA"], cluster.node_ids["nodeB"]}


def test_without_parallel_the_cluster_sets_it_and_pruning_stops_trials_on_their_nodes(cluster, tmp_path):
    """No --parallel: as many trials at a time as the cluster holds (2 nodes x 2 CPUs, 2 CPUs a
    run: 2), said on stderr. A pruner that prunes at the first report: each trial is pruned from
    the live metrics its run relays, and its run is cancelled on its node with the reason."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.replace("max_trials = 4", "max_trials = 2")
        .replace('type = "none"', 'type = "threshold"\nlower = 1e9')
        .replace("ray-sweep", "ray-prune")
        .replace("total_timesteps = 1024", "total_timesteps = 500000"),
        encoding="utf-8",
    )
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
            "--ray-address",
            cluster.address,
            "--ray-num-cpus",
            "2",
        ],
        cwd=tmp_path,
        env=caller_env(cluster),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        f"mosaic sweep: 2 at a time (the Ray cluster at {cluster.address} holds 2 run(s) at a time: 2 node(s), 4 CPUs"
        in done.stderr
    ), done.stderr[-3000:]
    trials = optuna.load_study(study_name="ray-prune", storage=storage).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.PRUNED] * 2
    for trial in trials:
        (run_id,) = trial.user_attrs["runs"]
        assert trial.intermediate_values
        events = [json.loads(line) for line in (runs / run_id / "events.jsonl").read_text().splitlines()]
        reason = events[-1]["payload"]["reason"]
        assert events[-1]["event"] == "run_cancelled", events[-1]
        assert reason.startswith(f"pruned by the sweep: study ray-prune trial {trial.number}, ThresholdPruner at step ")
        assert reason.endswith("(received SIGTERM)"), reason  # the node confirmed, as a local run does
        manifest = json.loads((runs / run_id / "manifest.json").read_text())
        assert manifest["optuna"]["pruned"] is True and manifest["ray"]["node_id"] in cluster.node_ids.values()
        assert max(e["payload"].get("global_step", 0) for e in events if e["event"] == "metrics") < 500000
        assert not processes_of(run_id)
