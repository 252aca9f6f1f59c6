"""The worker contract suite (mosaic_core.testing.contract_suite) for the example worker: a third
party's worker keeps the run contract with a checkpoint layout, StopOnSignal and the
host's flags (contract.host_flags, read back by contract.add_host_arguments)."""

from __future__ import annotations

from mosaic_core.testing.contract_suite import WorkerContractSuite


class TestExampleWorkerContract(WorkerContractSuite):
    worker = "example"
    algo = "random"
    env_id = "CartPole-v1"
    total_timesteps = 400_000  # a random policy is fast: long enough for a stop to land mid-run

    def test_a_run_that_ended_before_any_checkpoint_is_not_resumed(self) -> None:
        """A run that failed before its first checkpoint (its policy file raises at import): `mosaic
        resume` says it has none to go on from, in one line, and leaves its directory as it was."""
        policy = self.folder / "broken_policy.py"
        policy.write_text("raise RuntimeError('no policy today')\n")
        args = self.run_args("broken")
        args[args.index("--algo") + 1] = str(policy)
        failed = self.cli(*args)
        assert failed.returncode != 0 and self.events("broken")[-1]["event"] == "run_failed", failed.stderr[-2000:]
        before = {p: p.read_bytes() for p in self.run_dir("broken").rglob("*") if p.is_file()}
        self.one_line(self.cli("resume", "broken", "--runs-dir", str(self.runs_root)), "has no checkpoint")
        assert {p: p.read_bytes() for p in self.run_dir("broken").rglob("*") if p.is_file()} == before
