"""The one score (mosaic_core.runstore.score) and the seed groups (mosaic_core.runstore.groups):
the window is what its docstring says, an evaluation of the final policy wins over training
returns, group labels name what differs and never bookkeeping keys, mixed budgets are flagged."""

from __future__ import annotations

import json
from pathlib import Path

from mosaic_core import contract
from mosaic_core.runstore.groups import group_by_seed, mixed_budgets
from mosaic_core.runstore.score import MIN_EPISODES, Score, run_score, training_score


def test_window_is_the_last_tenth_of_the_steps_reached():
    points = [(step, float(step)) for step in range(0, 10_001, 50)]  # 201 episodes, return = step
    score = training_score(list(reversed(points)))  # any order
    window = [float(s) for s in range(9000, 10_001, 50)]  # step >= 0.9 * 10,000
    assert score == Score(sum(window) / len(window), "train", len(window), 10_000)


def test_a_thin_window_widens_to_the_last_episodes():
    points = [(10 * i, float(i)) for i in range(50)] + [(100_000, 1000.0)]  # one episode in the window
    score = training_score(points)
    last = [float(i) for i in range(50 - MIN_EPISODES + 1, 50)] + [1000.0]
    assert score.episodes == MIN_EPISODES and score.value == sum(last) / len(last)
    assert training_score([]) is None and training_score([(5, float("nan"))]) is None


def test_episodes_ending_at_one_step_are_cut_in_their_logged_order_not_by_value():
    """Parallel envs end episodes at the same step: the last 10 episodes are the last 10 logged,
    whatever their returns (a multi-agent run's team and agent series then cover the same episodes)."""
    logged = [(100 * (i // 4), float(v)) for i, v in enumerate([5, 1, 9, 2] * 4)]  # 4 episodes per step
    assert training_score(logged).value == sum([9, 2] + [5, 1, 9, 2] * 2) / MIN_EPISODES
    assert training_score([(s, -v) for s, v in logged]).value == -training_score(logged).value


def _evaluation(run_dir: Path, name: str, step: int, returns: list[float]) -> None:
    folder = run_dir / "evaluations" / name
    folder.mkdir(parents=True)
    result = contract.eval_result(
        worker="cleanrl",
        algo="ppo",
        env_id="CartPole-v1",
        checkpoint="c",
        global_step=step,
        returns=returns,
        lengths=[1] * len(returns),
        seeds=list(range(len(returns))),
        deterministic=True,
    )
    contract.write_eval(folder / contract.EVAL_FILE, result)


def test_the_final_evaluation_wins_and_an_early_one_does_not(tmp_path):
    points = [(step, 10.0) for step in range(100, 10_001, 100)]
    _evaluation(tmp_path, "early", 5_000, [400.0] * 10)
    assert run_score(tmp_path, points) == Score(10.0, "train", 11, 10_000)  # step 5,000 is not the final policy
    _evaluation(tmp_path, "final", 10_000, [200.0, 300.0])
    assert run_score(tmp_path, points) == Score(250.0, "eval", 2, 10_000)
    (tmp_path / "evaluations" / "final" / contract.EVAL_FILE).write_text("{not json")
    assert run_score(tmp_path, points).source == "train"  # a damaged file is no evaluation


def test_an_agents_score_is_its_mean_in_the_final_evaluation_else_its_training_returns(tmp_path):
    points = [(step, -1.0) for step in range(100, 1_001, 100)]
    folder = tmp_path / "evaluations" / "final"
    folder.mkdir(parents=True)
    result = contract.eval_result(
        worker="xuance",
        algo="mappo",
        env_id="mpe/simple_spread_v3",
        checkpoint="c",
        global_step=1_000,
        returns=[-30.0, -20.0],
        lengths=[25, 25],
        seeds=[1, 2],
        deterministic=True,
        agent_returns=[{"agent_0": -10.0, "agent_1": -20.0}, {"agent_0": -6.0, "agent_1": -14.0}],
    )
    contract.write_eval(folder / contract.EVAL_FILE, result)
    assert run_score(tmp_path, points) == Score(-25.0, "eval", 2, 1_000)  # the team
    assert run_score(tmp_path, points, "agent_0") == Score(-8.0, "eval", 2, 1_000)
    assert run_score(tmp_path, points, "agent_9") == Score(-1.0, "train", 10, 1_000)  # not evaluated: training's
    result["episodes"][1]["agents"] = "not a table"
    (folder / contract.EVAL_FILE).write_text(json.dumps(result))
    assert run_score(tmp_path, points, "agent_0").source == "train"


def _run(root: Path, run_id: str, seed: int, worker: str, algo: str, total: int, **extras) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "worker": worker,
                "algo": algo,
                "env_id": "CartPole-v1",
                "total_timesteps": total,
                "seed": seed,
                "extras": {"metrics_interval_s": 0.5 + seed, "experiment": "e", **extras},
            }
        )
    )
    return run_dir


def test_groups_are_labelled_by_what_differs_and_budgets_are_flagged(tmp_path):
    dirs = [_run(tmp_path, f"c{s}", s, "cleanrl", "ppo", 30_000) for s in (1, 2)]
    dirs += [_run(tmp_path, f"r{s}", s, "rllib", "PPO", 52_000) for s in (1, 2, 3)]
    groups = group_by_seed(dirs)
    assert [(g.label, [d.name for d in g.runs]) for g in groups] == [
        ("cleanrl ppo CartPole-v1 30000 steps", ["c1", "c2"]),
        ("rllib PPO CartPole-v1 52000 steps", ["r1", "r2", "r3"]),
    ]
    assert "30000" in mixed_budgets(groups) and "52000" in mixed_budgets(groups)
    same = group_by_seed(
        [
            _run(tmp_path, f"l{s}", s, "cleanrl", "ppo", 1000, algo_params={"learning_rate": lr})
            for s, lr in ((1, 0.1), (2, 0.1), (3, 0.01))
        ]
    )
    assert [g.label for g in same] == ["ppo CartPole-v1 learning_rate=0.1", "ppo CartPole-v1 learning_rate=0.01"]
    assert mixed_budgets(same) is None
