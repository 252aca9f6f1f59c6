"""`mosaic experiment run` then `mosaic compare`, for real: 3 seeds × CleanRL PPO and DQN on
CartPole with small budgets; the table's IQM and CIs equal rliable's on the same scores (each
run's score as `mosaic runs` shows it) with the same bootstrap seed; a second `experiment run`
runs nothing; the exports hold the same scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rliable import library, metrics

from tests.conftest import run_cli

SPEC = """
name = "done-when"
seeds = [1, 2, 3]
total_timesteps = 1500
parallel = 2

[grid]
worker = ["cleanrl"]
algo = ["ppo", "dqn"]
env = ["CartPole-v1"]
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("experiment")
    (workdir / "spec.toml").write_text(SPEC)
    root = workdir / "runs"
    result = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=workdir, timeout=600)
    assert result.returncode == 0, result.stderr
    return workdir, root


@pytest.mark.slow
def test_compare_prints_rliables_iqm_and_cis(experiment):
    workdir, root = experiment
    listed = json.loads(run_cli(["runs", "--runs-dir", str(root), "--json"], cwd=workdir).stdout)
    # each run's score: CleanRL's evaluation of the model it saved at the end (its eval.json)
    assert len(listed) == 6 and all(r["status"] == "completed" and r["score"]["source"] == "eval" for r in listed)
    scores = {
        algo: np.array([[r["score"]["value"]] for r in sorted(listed, key=lambda r: r["run_id"]) if r["algo"] == algo])
        for algo in ("ppo", "dqn")
    }
    assert all(m.shape == (3, 1) for m in scores.values())
    shown = run_cli(
        ["compare", "done-when", "--runs-dir", str(root), "--json", "--reps", "500", "--seed", "4"],
        cwd=workdir,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    assert "fewer than 5 seeds" in shown.stderr and "the 95% CIs are wide" in shown.stderr
    section = json.loads(shown.stdout)["sections"]["CartPole-v1"]
    for algo, matrix in scores.items():
        group = section["groups"][f"{algo} CartPole-v1"]
        assert group["runs"] == 3
        for name, func in (("IQM", metrics.aggregate_iqm), ("mean", metrics.aggregate_mean)):
            np.random.seed(4)  # rliable draws its bootstrap from numpy's global state
            points, intervals = library.get_interval_estimates(
                {"g": matrix}, lambda x, func=func: np.array([func(x)]), reps=500
            )
            assert group[name]["point"] == pytest.approx(points["g"][0], abs=1e-6)
            assert [group[name]["low"], group[name]["high"]] == pytest.approx(
                [intervals["g"][0][0], intervals["g"][1][0]], abs=1e-6
            )
    table = run_cli(["compare", "done-when", "--runs-dir", str(root), "--reps", "500", "--seed", "4"], cwd=workdir)
    iqm = section["groups"]["ppo CartPole-v1"]["IQM"]
    assert f"{iqm['point']:.2f} [{iqm['low']:.2f}, {iqm['high']:.2f}]" in table.stdout
    assert "probability of improvement" in table.stdout and "eval 6" in table.stderr


@pytest.mark.slow
def test_a_second_run_runs_nothing_and_exports_hold_the_scores(experiment):
    workdir, root = experiment
    again = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=workdir)
    assert again.returncode == 0 and "6 of 6 runs completed already, 0 to run" in again.stderr
    assert len([d for d in root.iterdir() if not d.name.startswith(".")]) == 6
    done = run_cli(
        [
            "compare",
            "done-when",
            "--runs-dir",
            str(root),
            "--reps",
            "200",
            "--export",
            "scores.npz",
            "-o",
            "report.png",
        ],
        cwd=workdir,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    exported = np.load(workdir / "scores.npz")
    listed = json.loads(run_cli(["runs", "--runs-dir", str(root), "--json"], cwd=workdir).stdout)
    assert sorted(exported["ppo CartPole-v1"][:, 0]) == pytest.approx(
        sorted(r["score"]["value"] for r in listed if r["algo"] == "ppo")
    )
    assert list(exported["__tasks__"]) == ["CartPole-v1"]
    assert (workdir / "report.png").stat().st_size > 10_000
    marl = run_cli(
        ["compare", "done-when", "--runs-dir", str(root), "--reps", "200", "--export", "m.json"], cwd=workdir
    )
    assert marl.returncode == 0, marl.stderr
    data = json.loads((workdir / "m.json").read_text())["mosaic"]["CartPole-v1"]
    assert len(data["dqn CartPole-v1"]) == 3 and "absolute_metrics" in data["dqn CartPole-v1"]["run_0"]


@pytest.mark.slow
def test_a_seed_that_did_not_complete_runs_again_as_a_new_attempt(tmp_path):
    from pathlib import Path

    from mosaic_experiments.spec import load

    (tmp_path / "spec.toml").write_text(
        'name = "again"\nseeds = [7]\ntotal_timesteps = 600\n'
        '[[group]]\nworker = "cleanrl"\nalgo = "ppo"\nenv = "CartPole-v1"\n'
    )
    exp = load(Path(tmp_path / "spec.toml"))
    root = tmp_path / "runs"
    failed = root / exp.run_id(exp.groups[0], 7)  # an earlier attempt that failed
    failed.mkdir(parents=True)
    (failed / "events.jsonl").write_text(
        json.dumps(
            {
                "event": "run_failed",
                "run_id": failed.name,
                "seq": 1,
                "timestamp": 1.0,
                "payload": {"error": "node lost"},
            }
        )
        + "\n"
    )
    result = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (
        "0 of 1 runs completed already, 1 to run" in result.stderr and f"{failed.name}-a2: completed" in result.stderr
    )
    again = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root)], cwd=tmp_path)
    assert "1 of 1 runs completed already, 0 to run" in again.stderr
