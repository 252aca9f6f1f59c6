"""One fast, reliable learning check: bundled PPO with a fixed seed clearly beats random on CartPole.

A random policy scores about 22 on CartPole-v1; 40k steps of PPO (seed 1) reach well over 100.
The full-budget comparison with CleanRL's published results is bench/learning.py, not a test.
"""

from __future__ import annotations

import numpy as np

from .conftest import run_ok, scalars


def test_ppo_learns_cartpole(tmp_path):
    run = run_ok("ppo", "--env-id", "CartPole-v1", "--total-timesteps", "40000", "--seed", "1", cwd=tmp_path)
    returns = [value for _, value in scalars(run.run_dir)["charts/episodic_return"]]
    assert np.mean(returns[:10]) < 40  # it started out random
    assert np.mean(returns[-10:]) > 100, returns[-10:]
