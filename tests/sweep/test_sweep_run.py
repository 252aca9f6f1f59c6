"""`mosaic sweep run` for real: trials of the bundled ppo on CartPole-v1 as `mosaic run`
subprocesses, several sweep processes against one study, and what a study tells afterwards."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.sweep.conftest import (
    events,
    load,
    manifest,
    optuna,
    processes_in,
    running_trial_of,
    start_sweep,
    sweep,
    write_spec,
)

COMPLETE = optuna.trial.TrialState.COMPLETE
pytestmark = pytest.mark.slow  # every test here trains (ppo, tiny budgets)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """One sweep with --parallel 2 on the default SQLite storage: 3 trials, 1 seed each."""
    workdir = tmp_path_factory.mktemp("two-processes")
    spec = write_spec(workdir)
    result = sweep(["run", str(spec), "--parallel", "2"], cwd=workdir)
    assert result.returncode == 0, result.stderr
    return workdir, result


def test_two_sweep_processes_share_one_sqlite_study_without_duplicates(two_processes):
    workdir, result = two_processes
    study = load("tiny", f"sqlite:///{workdir}/var/sweeps/tiny.db")
    trials = study.get_trials()
    assert [t.state for t in trials] == [COMPLETE] * 3  # --max-trials counted across both processes
    assert len({t.params["learning_rate"] for t in trials}) == 3
    assert len({t.user_attrs["process"] for t in trials}) == 2  # both processes took trials
    runs = [run for t in trials for run in t.user_attrs["runs"]]
    assert sorted(runs) == sorted({f"tiny-t{t.number}-s1" for t in trials})
    root = workdir / "var/trainer/runs"
    for trial in trials:
        (run_id,) = trial.user_attrs["runs"]
        assert events(root, run_id)[-1]["event"] == "run_completed"
        section = manifest(root, run_id)["optuna"]
        assert section == {
            "study": "tiny",
            "trial": trial.number,
            "params": trial.params,
            "seed": 1,
            "storage": "sqlite:///var/sweeps/tiny.db",
        }
        config = json.loads((root / run_id / "config.json").read_text())
        assert config["extras"]["algo_params"]["learning_rate"] == trial.params["learning_rate"]
        assert config["extras"]["metrics_interval_s"] == 0.5  # the sweep's cadence, set through the declaration
        argv = json.loads((root / run_id / "launch.json").read_text())["argv"]
        assert any(a.startswith("--learning-rate") for a in argv) and not any("optuna" in a for a in argv)
        assert trial.value == pytest.approx(trial.user_attrs["seed_values"][0])
    assert "best trial" in result.stderr and processes_in(workdir) == []


def test_status_and_best_config(two_processes):
    workdir, _ = two_processes
    status = sweep(["status", "tiny", "--json"], cwd=workdir)
    data = json.loads(status.stdout)
    assert data["counts"] == {"complete": 3} and data["running_processes"] == []
    best = max(data["trials"], key=lambda t: t["value"])
    assert data["best"]["number"] == best["number"]
    table = sweep(["status", "tiny"], cwd=workdir).stdout
    assert "trials: 3 complete" in table and f"best: trial {best['number']}" in table
    out = sweep(["best", "tiny", "--config", "best.json", "--plot", "best.png"], cwd=workdir)
    assert out.returncode == 0, out.stderr
    config = json.loads((workdir / "best.json").read_text())
    assert config["algo"] == "ppo" and config["env_id"] == "CartPole-v1" and config["seed"] == 1
    assert config["extras"]["algo_params"]["learning_rate"] == best["params"]["learning_rate"]
    assert (workdir / "best.png").stat().st_size > 10_000
    dry = sweep(["run"], cwd=workdir)  # argparse: SPEC is required
    assert dry.returncode == 2
    from tests.conftest import run_cli

    ready = run_cli(["run", "--worker", "cleanrl", "--config", "best.json", "--dry-run"], cwd=workdir)
    assert ready.returncode == 0, ready.stderr


def test_a_study_with_another_search_space_is_refused(two_processes):
    workdir, _ = two_processes
    other = write_spec(
        workdir, "other", extra='study_name = "tiny"', params='[params.gamma]\ntype = "float"\nlow = 0.9\nhigh = 0.999'
    )
    before = sorted(p.name for p in (workdir / "var/trainer/runs").iterdir())
    result = sweep(["run", str(other)], cwd=workdir)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert (
        "study 'tiny' in sqlite:///var/sweeps/tiny.db exists with a different search space (params.gamma"
        in result.stderr
    )
    assert sorted(p.name for p in (workdir / "var/trainer/runs").iterdir()) == before


def test_two_processes_share_a_journal_file(tmp_path):
    """Two `mosaic sweep run` started at once (as on two machines) on one journal file.
    (No fixed sampler seed: two separate processes seeded alike would draw alike.)"""
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace("seed = 0\n", ""))
    args = ["run", str(spec), "--storage", "journal:studies/tiny.journal", "--max-trials", "3"]
    procs = [start_sweep(args, tmp_path) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    trials = load("tiny", f"journal:{tmp_path}/studies/tiny.journal").get_trials()
    assert [t.state for t in trials] == [COMPLETE] * 3
    assert len({t.params["learning_rate"] for t in trials}) == 3
    assert len({t.user_attrs["process"] for t in trials}) == 2
    section = manifest(tmp_path / "var/trainer/runs", trials[0].user_attrs["runs"][0])["optuna"]
    assert section["storage"] == "journal:studies/tiny.journal"


def test_a_killed_sweep_process_trial_is_retried_by_another(tmp_path):
    spec = write_spec(tmp_path, extra="max_retries = 1", params="")
    spec.write_text(spec.read_text().replace("max_trials = 3", "max_trials = 2"))
    db = tmp_path / "var/sweeps/tiny.db"
    first = start_sweep(["run", str(spec), "--total-timesteps", "20000"], tmp_path)
    number = running_trial_of("tiny", db, first.pid)
    time.sleep(2)
    first.kill()  # SIGKILL: no handler runs; its seed's `mosaic run` gets SIGTERM from the kernel
    first.communicate()
    time.sleep(2 * 1 + 1 + 1)  # past the grace period (2 heartbeats of heartbeat_s = 1, + 1 s: storage.py):
    # the next sweep process finds the trial stale when it starts, however long its own trial takes
    second = sweep(["run", str(spec)], cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    trials = load("tiny", f"sqlite:///{db}").get_trials()
    dead = trials[number]
    assert dead.state == optuna.trial.TrialState.FAIL
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == number]
    assert len(retries) == 1 and retries[0].state == COMPLETE
    assert retries[0].params == dead.params and retries[0].user_attrs["process"] != dead.user_attrs["process"]
    assert sum(t.state == COMPLETE for t in trials) == 2
    root = tmp_path / "var/trainer/runs"
    (killed_run,) = dead.user_attrs["runs"]
    assert events(root, killed_run)[-1]["event"] == "run_cancelled"  # the run host cancelled its training
    assert processes_in(tmp_path) == []


def test_a_hopeless_trial_is_pruned_from_live_metrics(tmp_path):
    spec = write_spec(tmp_path, params="", text=None)
    text = spec.read_text().replace('type = "none"', 'type = "threshold"\nlower = 1e9')
    text = text.replace("max_trials = 3", "max_trials = 1")
    spec.write_text(text)
    result = sweep(["run", str(spec), "--total-timesteps", "200000"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (trial,) = load("tiny", f"sqlite:///{tmp_path}/var/sweeps/tiny.db").get_trials()
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.intermediate_values
    (run_id,) = trial.user_attrs["runs"]
    root = tmp_path / "var/trainer/runs"
    last = events(root, run_id)[-1]
    assert last["event"] == "run_cancelled"
    assert last["payload"]["reason"].startswith("pruned by the sweep: study tiny trial 0, ThresholdPruner at step ")
    assert last["payload"]["reason"].endswith("(received SIGTERM)")
    section = manifest(root, run_id)["optuna"]
    assert section["pruned"] is True and section["cancel_reason"].startswith("pruned by the sweep")
    assert max(e["payload"].get("global_step", 0) for e in events(root, run_id) if e["event"] == "metrics") < 200000
    assert "pruned by the sweep" in result.stderr and processes_in(tmp_path) == []


def test_grid_mode_runs_each_env_once_across_sweep_processes_given_by_the_old_flag(tmp_path):
    text = write_spec(tmp_path).read_text()
    text = text.replace('env_id = "CartPole-v1"', 'env_ids = ["CartPole-v1", "MountainCar-v0"]')
    text = text.replace('type = "random"\nseed = 0', 'type = "grid"').replace("max_trials = 3", "max_trials = 50")
    text = text[: text.index("[params.learning_rate]")]
    spec = write_spec(tmp_path, "grid", text=text)
    result = sweep(["run", str(spec), "--parallel", "2"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trials = load("grid", f"sqlite:///{tmp_path}/var/sweeps/grid.db").get_trials()
    assert [t.state for t in trials] == [COMPLETE] * 2
    assert sorted(t.params["env_id"] for t in trials) == ["CartPole-v1", "MountainCar-v0"]
    root = tmp_path / "var/trainer/runs"
    for trial in trials:
        (run_id,) = trial.user_attrs["runs"]
        assert json.loads((root / run_id / "config.json").read_text())["env_id"] == trial.params["env_id"]


def test_sigterm_to_a_sweep_cancels_every_running_seed(tmp_path):
    spec = write_spec(tmp_path)
    proc = start_sweep(["run", str(spec), "--parallel", "2", "--total-timesteps", "200000"], tmp_path)
    db = tmp_path / "var/sweeps/tiny.db"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # both sweep processes have a seed that started training
        runs = list((tmp_path / "var/trainer/runs").glob("*/events.jsonl"))
        if len(runs) == 2 and all('"run_started"' in p.read_text() for p in runs):
            break
        time.sleep(0.3)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    trials = load("tiny", f"sqlite:///{db}").get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.FAIL] * 2
    assert all(t.user_attrs["interrupted"] == "received SIGTERM" for t in trials)
    root = tmp_path / "var/trainer/runs"
    for trial in trials:
        last = events(root, trial.user_attrs["runs"][0])[-1]
        assert last["event"] == "run_cancelled"
        assert last["payload"]["reason"] == "sweep process stopped (received SIGTERM) (received SIGTERM)"
    assert processes_in(tmp_path) == []
