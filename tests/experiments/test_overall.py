"""`mosaic compare --group-by` across envs: a table per env and an overall table on scores divided
by each env's reference (`--reference ENV=SCORE`, else its registered reward_threshold), whose IQM,
CIs and probability of improvement equal rliable's on the normalised `runs × envs` matrices; groups
trained on different budgets are flagged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rliable import library, metrics

from tests.conftest import run_cli
from tests.experiments.test_bad_input import make_run

LEVELS = {("ppo", "CartPole-v1"): 100.0, ("ppo", "Acrobot-v1"): -90.0, ("dqn", "CartPole-v1"): 60.0}
LEVELS[("dqn", "Acrobot-v1")] = -120.0
REFERENCE = {"CartPole-v1": 475.0, "Acrobot-v1": 100.0}  # CartPole's reward_threshold; Acrobot's given


@pytest.mark.filterwarnings("ignore:random_state is deprecated:FutureWarning")  # arch, as rliable calls it
def test_an_overall_table_on_normalised_scores(tmp_path):
    root = tmp_path / "runs"
    for (algo, env), level in LEVELS.items():
        for seed in (1, 2, 3):
            make_run(root, f"{algo}-{env}-s{seed}", seed, algo, env, level)
    done = run_cli(
        ["compare", "exp", "--runs-dir", str(root), "--group-by", "algo", "--reference", "Acrobot-v1=100"]
        + ["--reps", "300", "--seed", "5", "--json"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    sections = json.loads(done.stdout)["sections"]
    assert sorted(sections) == ["Acrobot-v1", "CartPole-v1", "overall"]
    envs = ["Acrobot-v1", "CartPole-v1"]  # the matrices' columns: the envs in the order of the runs found
    scores = {
        algo: np.array([[(LEVELS[(algo, env)] + seed) / REFERENCE[env] for env in envs] for seed in (1, 2, 3)])
        for algo in ("ppo", "dqn")
    }
    overall = sections["overall"]["groups"]
    for algo, matrix in scores.items():
        np.random.seed(5)  # rliable draws its bootstrap from numpy's global state
        points, intervals = library.get_interval_estimates(
            {"g": matrix},
            lambda x: np.array([metrics.aggregate_iqm(x)]),
            reps=300,
            random_state=np.random.RandomState(5),
        )
        shown = overall[algo]["IQM"]
        assert shown["point"] == pytest.approx(points["g"][0], abs=1e-6)
        assert [shown["low"], shown["high"]] == pytest.approx([intervals["g"][0][0], intervals["g"][1][0]], abs=1e-6)
    improvement = sections["overall"]["improvement"]
    better = next(v for k, v in improvement.items() if k.startswith("ppo"))
    assert better["point"] == pytest.approx(1.0)  # ppo's normalised scores are above dqn's on both envs
    table = run_cli(  # the text table's heading (the replications change only its intervals)
        ["compare", "exp", "--runs-dir", str(root), "--group-by", "algo", "--reference", "Acrobot-v1=100"]
        + ["--reps", "200"],
        cwd=tmp_path,
    )
    assert "== overall: scores / reference (Acrobot-v1 100, CartPole-v1 475) ==" in table.stdout


def test_groups_of_different_budgets_are_flagged(tmp_path):
    root = tmp_path / "runs"
    for algo, budget in (("ppo", 1000), ("dqn", 3000)):
        for seed in (1, 2):
            make_run(root, f"{algo}-s{seed}", seed, algo, "CartPole-v1", 50.0)
            config = json.loads((root / f"{algo}-s{seed}" / "config.json").read_text())
            (root / f"{algo}-s{seed}" / "config.json").write_text(json.dumps({**config, "total_timesteps": budget}))
    done = run_cli(["compare", "exp", "--runs-dir", str(root), "--reps", "200"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    flagged = [line for line in done.stderr.splitlines() if "budgets differ" in line]
    assert len(flagged) == 1 and "1000" in flagged[0] and "3000" in flagged[0], done.stderr
    assert "1000" in done.stdout and "3000" in done.stdout  # the budget labels the groups
