"""The worker contract suite (mosaic_core.testing.contract_suite) for the example worker: a third
party's worker keeps the run contract with a checkpoint layout, StopOnSignal and --resume-from."""

from __future__ import annotations

from mosaic_core.testing.contract_suite import WorkerContractSuite


class TestExampleWorkerContract(WorkerContractSuite):
    worker = "example"
    algo = "random"
    env_id = "CartPole-v1"
    total_timesteps = 400_000  # a random policy is fast: long enough for a stop to land mid-run
