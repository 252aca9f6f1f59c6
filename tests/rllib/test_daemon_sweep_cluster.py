"""The RLlib worker through the other ways in: an IMPALA run submitted to `mosaic daemon` over
gRPC, `mosaic sweep` trials with `worker = "rllib"` (a trial's parameters reach RLlib's config
through ``extras.algo_params``), and a run that joins an existing Ray cluster (`ray start`
from the worker's environment, on loopback) and leaves it running, with nothing of the run's own
behind."""

import json
import os
import subprocess

import pytest

from tests.conftest import worker_bin
from tests.rllib.conftest import events_of, run_args

pytestmark = pytest.mark.slow  # each trains RLlib runs of about 1,000 env steps

# IMPALA's env runner samples on through an iteration's minimum time (10 s by default: 10,000 steps
# and 28 CPU-s for a 2,000-step run); iterations of 1 s end the run near its budget
IMPALA = {"num_env_runners": 1, "train_batch_size_per_learner": 500, "min_time_s_per_iteration": 1}
SWEEP = """
worker = "rllib"
algo = "PPO"
env_id = "CartPole-v1"
total_timesteps = 1000
seeds = 1
max_trials = 2
heartbeat_s = 1

[algo_params]
num_env_runners = 1
train_batch_size_per_learner = 500
minibatch_size = 128
num_epochs = 2

[objective]
metric = "charts/episodic_return"
last_n = 5

[sampler]
type = "random"
seed = 0

[pruner]
type = "none"

[params.lr]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""


def _trained(events: list[dict]) -> dict:
    assert events[-1]["event"] == "run_completed", events[-1]
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    assert last["global_step"] >= 1000 and last["episodes"] >= 10 and last["episodic_return"] > 0
    return last


def test_daemon_runs_a_submitted_impala_run(rllib_env, tmp_path, monkeypatch):
    from tests.trainer.conftest import completed_daemon_run

    monkeypatch.setenv("MOSAIC_VENVS", rllib_env["MOSAIC_VENVS"])  # the daemon's runs find the environment
    config = {
        "worker": "rllib",
        "algo": "IMPALA",
        "env_id": "CartPole-v1",
        # several iterations: IMPALA's learner reports an update in the iteration after the one that
        # sampled its batch when the env runner's episodes come back late
        "total_timesteps": 2000,
        "seed": 3,
        "extras": {"algo_params": IMPALA},
    }
    final, events, _log = completed_daemon_run(tmp_path, config)
    _trained(events)
    losses = {name for e in events if e["event"] == "metrics" for name in e["payload"]["losses"]}
    assert any("loss" in name for name in losses), f"no iteration reported a learner update: {losses}"
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["reason"] == "final" and saved[-1]["path"].startswith(final.run_dir)


def test_sweep_trials_train_rllib_with_sampled_params(rllib_env, tmp_path, monkeypatch):
    from tests.sweep.conftest import load, sweep

    monkeypatch.setenv("MOSAIC_VENVS", rllib_env["MOSAIC_VENVS"])
    (tmp_path / "rl.toml").write_text(SWEEP, encoding="utf-8")
    done = sweep(["run", "rl.toml"], cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr
    trials = load("rl", f"sqlite:///{tmp_path}/var/sweeps/rl.db").get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 2
    for trial in trials:
        (run_id,) = trial.user_attrs["runs"]
        run_dir = tmp_path / "var/trainer/runs" / run_id
        _trained(events_of(run_dir))
        argv = json.loads((run_dir / "launch.json").read_text())["command"]
        params = json.loads(argv[argv.index("--params") + 1])
        assert params["lr"] == trial.params["lr"] and params["num_epochs"] == 2
        assert trial.value > 0  # CartPole's return: the last 5 episodes' mean, from TensorBoard


def test_a_run_joins_an_existing_cluster_and_leaves_it_running(rllib_env, tmp_path):
    from tests.ray_launcher.loopback import LoopbackCluster, alive

    cluster = LoopbackCluster(cpus_per_node=2, bin_dir=worker_bin(rllib_env, "rllib"))
    try:
        cluster.start_node("nodeA")
        cluster.wait_nodes(1)
        env = {**rllib_env, **cluster.client_env()}
        extras = {"ray_address": cluster.address, "checkpoint_frequency": 10**6}
        done = subprocess.run(
            run_args("joined", tmp_path, extras=extras), env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
        events = events_of(tmp_path / "joined")
        assert events[0]["payload"]["rllib"]["ray_address"] == cluster.address
        _trained(events)
        assert not (tmp_path / "joined" / "ray").exists()  # no cluster of its own
        [driver] = {e["payload"]["pid"] for e in events if e["event"] == "heartbeat"}
        assert not alive([driver])
        cluster.wait_nodes(1)  # the cluster still answers, its node alive
    finally:
        left = cluster.stop()
    assert not left, f"Ray processes left after the cluster stopped: {left}"
    assert os.path.isdir(tmp_path / "joined" / "checkpoints")
