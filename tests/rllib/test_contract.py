"""The worker contract suite (mosaic_core.testing.contract_suite) for the RLlib worker: PPO on
CartPole trains, is SIGTERMed near its middle through the host and continued by `mosaic resume` with
one history, and `mosaic evaluate` writes the eval.json of a CleanRL evaluation; with the CleanRL
plugin disabled, `mosaic algos --worker rllib` and `mosaic evaluate` still work."""

from __future__ import annotations

import json

import pytest

from mosaic_core.testing.contract_suite import WorkerContractSuite
from tests.eval_schema import assert_same_schema, cleanrl_evaluation
from tests.rllib.conftest import SMALL

pytestmark = pytest.mark.slow  # a local Ray cluster per run: the main lane runs them, the gymnasium 1.x lane skips them


class TestRLlibContract(WorkerContractSuite):
    worker = "rllib"
    algo = "PPO"
    env_id = "CartPole-v1"
    total_timesteps = 4000  # 8 iterations of 500 steps: the stop lands near the 4th
    extras = {"algo_params": SMALL}
    evaluate = True
    timeout = 600.0

    @pytest.fixture(autouse=True)
    def _built(self, rllib_env) -> None:
        self.env = {"MOSAIC_VENVS": rllib_env["MOSAIC_VENVS"]} if "MOSAIC_VENVS" in rllib_env else {}

    def test_evaluate_without_the_cleanrl_plugin_writes_cleanrl_s_schema(self) -> None:
        first = self.cli(*self.run_args("played"))
        assert first.returncode == 0, first.stderr[-3000:]
        self.env = {**self.env, "MOSAIC_DISABLE_PLUGINS": "cleanrl"}
        listed = self.cli("algos", "--worker", "rllib", "--json")
        assert listed.returncode == 0, listed.stderr[-3000:]
        assert {"PPO", "DQN"} <= {e["algo"] for e in json.loads(listed.stdout)["algorithms"]}
        done = self.cli("evaluate", "played", "--episodes", "3", "--runs-dir", str(self.runs_root), "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert result["worker"] == "rllib" and result["global_step"] > 0 and len(result["episodes"]) == 3
        assert all(e["return"] == e["length"] > 0 for e in result["episodes"])  # CartPole: 1 per step
        assert_same_schema(result, cleanrl_evaluation(self.folder), self.seed)
