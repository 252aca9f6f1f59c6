"""One rule for algorithm names, whatever the worker (mosaic_core.algonames): as the worker spells
it, else in any case when that names one of its algorithms, else "did you mean"."""

from __future__ import annotations

import json

import pytest

from mosaic_core.algonames import spelling, unknown_algorithm


@pytest.mark.parametrize(
    "algo, names, found",
    [
        ("ppo", ["ppo", "dqn"], "ppo"),
        ("PPO", ["ppo", "dqn"], "ppo"),
        ("mappo", ["mappo", "MAPPO"], "mappo"),  # as spelt wins over another case
        ("Mappo", ["mappo", "MAPPO"], None),  # two in another case: none
        ("ppo2", ["ppo"], None),
    ],
)
def test_spelling(algo, names, found):
    assert spelling(algo, names) == found


def test_unknown_names_say_did_you_mean_in_the_workers_spelling():
    assert (
        unknown_algorithm("PP0", ["PPO", "DQN"], "rllib")
        == "algo 'PP0' is not one the rllib worker runs; did you mean PPO? (known: DQN, PPO)"
    )
    assert "did you mean" not in unknown_algorithm("zzzz", ["ppo"], "cleanrl")
    assert (
        unknown_algorithm("Mappo", ["mappo", "MAPPO"], "x")
        == "algo 'Mappo' matches MAPPO and mappo of the x worker: give one of them as it is spelt"
    )


def test_every_worker_takes_its_names_in_any_case(mosaic):
    def algo_of(*args):
        done = mosaic("run", *args, "--env", "CartPole-v1", "--total-timesteps", "64", "--dry-run", "--emit-summary")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    cleanrl = algo_of("--worker", "cleanrl", "--algo", "PPO")
    assert cleanrl["config"]["algo"] == "ppo" and cleanrl["module"] == "cleanrl_worker.algorithms.ppo"
    assert algo_of("--worker", "example", "--algo", "RANDOM")["config"]["algo"] == "random"
    typo = mosaic("run", "--worker", "cleanrl", "--algo", "PPO2", "--env", "CartPole-v1", "--dry-run")
    assert typo.returncode == 2 and "algo 'PPO2' is not one the cleanrl worker runs; did you mean ppo?" in typo.stderr
    assert len(typo.stderr.splitlines()) == 1
    script = mosaic("run", "--worker", "example", "--algo", "no_such_policy.py", "--env", "CartPole-v1", "--dry-run")
    assert "not one the example worker runs" not in script.stderr  # a path is code, not a name
