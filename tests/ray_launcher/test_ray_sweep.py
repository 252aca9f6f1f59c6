"""`mosaic sweep run SPEC --ray-address` without --parallel: the cluster says how many trials at a
time, and a pruner stops trials on their nodes. (A sweep whose trials use both nodes: the launcher
contract, test_ray_contract.py.) The job is the bundled ppo (the shared sweep spec)."""

from __future__ import annotations

import json
import subprocess

import pytest

from mosaic_core.testing.launcher_suite import sweep_spec
from tests.conftest import BIN
from tests.ray_launcher.conftest import caller_env, processes_of

optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")


def test_without_parallel_the_cluster_sets_it_and_pruning_stops_trials_on_their_nodes(cluster, tmp_path):
    """No --parallel: as many trials at a time as the cluster holds (2 nodes x 2 CPUs, 2 CPUs a
    run: 2), said on stderr. A pruner that prunes at the first report: each trial is pruned from
    the live metrics its run relays, and its run is cancelled on its node with the reason."""
    spec = tmp_path / "spec.toml"
    pruner = 'type = "threshold"\nlower = 1e9'
    spec.write_text(sweep_spec("ray-prune", max_trials=2, total_timesteps=500000, pruner=pruner), encoding="utf-8")
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
