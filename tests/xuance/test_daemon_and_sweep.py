"""A XuanCe run submitted to `mosaic daemon` over gRPC, and `mosaic sweep` trials with
`worker = "xuance"` (a trial's parameters reach XuanCe's config through ``extras.algo_params``)."""

import json

import pytest
from conftest import SMALL, SPREAD, events_of

pytestmark = pytest.mark.slow  # each trains XuanCe runs of 500 steps

AGENTS = {"agent_0", "agent_1", "agent_2"}
SWEEP = f"""
worker = "xuance"
algo = "vdn"
env_id = "{SPREAD}"
total_timesteps = 500
seeds = 1
max_trials = 2
heartbeat_s = 1

[extras]
parallels = {SMALL["parallels"]}
vectorize = "{SMALL["vectorize"]}"

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


def test_daemon_runs_a_submitted_xuance_run(xuance_env, tmp_path, monkeypatch):
    from tests.trainer.conftest import completed_daemon_run

    monkeypatch.setenv("MOSAIC_VENVS", xuance_env["MOSAIC_VENVS"])  # the daemon's runs find the environment
    config = {
        "worker": "xuance",
        "algo": "vdn",
        "env_id": SPREAD,
        "total_timesteps": 500,
        "seed": 3,
        "extras": {**SMALL, "learning_rate": 0.001},
    }
    final, events, _log = completed_daemon_run(tmp_path, config, timeout=300)
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    assert last["global_step"] >= 450 and set(last["agents"]) == AGENTS
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["reason"] == "final" and saved[-1]["path"].startswith(final.run_dir)


def test_sweep_trials_train_xuance_with_sampled_params(xuance_env, tmp_path, monkeypatch):
    from tests.sweep.conftest import load, sweep

    monkeypatch.setenv("MOSAIC_VENVS", xuance_env["MOSAIC_VENVS"])
    (tmp_path / "ma.toml").write_text(SWEEP, encoding="utf-8")
    done = sweep(["run", "ma.toml"], cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    trials = load("ma", f"sqlite:///{tmp_path}/var/sweeps/ma.db").get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 2
    for trial in trials:
        (run_id,) = trial.user_attrs["runs"]
        run_dir = tmp_path / "var/trainer/runs" / run_id
        assert events_of(run_dir)[-1]["event"] == "run_completed"
        argv = json.loads((run_dir / "launch.json").read_text())["command"]
        overrides = json.loads(argv[argv.index("--overrides") + 1])
        assert overrides["learning_rate"] == trial.params["learning_rate"] and overrides["parallels"] == 4
        assert trial.value < 0  # simple_spread's team return: the last 5 episodes' mean, from TensorBoard
