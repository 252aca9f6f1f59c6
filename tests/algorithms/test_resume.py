"""--resume-from continues a run: weights, optimizer, global step, normalisation, TensorBoard steps.

The resumed runs train with learning rate 0, so their final weights must equal the
checkpoint's exactly: proof the weights were loaded and not re-initialised.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from cleanrl_worker.checkpoint import load_checkpoint
from cleanrl_worker.gymcompat import NEXT_STEP_AUTORESET

from .conftest import TINY, Run, run_parallel, scalars


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def adam_steps(optimizer_state: dict) -> float:
    return float(next(iter(optimizer_state["state"].values()))["step"])


@pytest.fixture(scope="module")
def resumed(smoke_runs, tmp_path_factory) -> dict[str, tuple[Run, dict, str]]:
    """ppo_continuous_action and dqn resumed from their smoke checkpoints, with learning rate 0."""
    root = tmp_path_factory.mktemp("resume")
    budgets = {
        "ppo_continuous_action": ["--total-timesteps", "1024", "--learning-rate", "0"],
        "dqn": ["--total-timesteps", "1500", "--learning-rate", "0", "--learning-starts", "100"],
    }
    jobs, before = {}, {}
    for algo, extra in budgets.items():
        path = smoke_runs[algo].run_dir / f"{algo}.cleanrl_model"
        before[algo] = (load_checkpoint(path), digest(path), path)
        flags = [*TINY[algo][:2], *TINY[algo][4:], *extra, "--resume-from", str(path), "--save-model"]
        jobs[algo] = (algo, flags, root / algo)
    runs = run_parallel(jobs)
    for _, sha, path in before.values():
        assert digest(path) == sha, f"{path} was changed by resuming from it"
    return {algo: (runs[algo], before[algo][0], before[algo][2]) for algo in budgets}


def test_ppo_continuous_restores_weights_optimizer_steps_and_normalisation(resumed):
    run, ckpt, _ = resumed["ppo_continuous_action"]
    assert run.returncode == 0, run.stderr[-3000:]
    final = load_checkpoint(run.run_dir / "ppo_continuous_action.cleanrl_model")
    assert final["global_step"] == 1024 and ckpt["global_step"] == 512
    assert final["iteration"] == 4 and ckpt["iteration"] == 2  # the LR schedule continued from iteration 3
    for name, tensor in ckpt["models"]["agent"].items():
        assert torch.equal(final["models"]["agent"][name], tensor), name
    updates = 2 * 2 * 4  # iterations x update epochs x minibatches of the resumed run
    assert adam_steps(final["optimizers"]["optimizer"]) == adam_steps(ckpt["optimizers"]["optimizer"]) + updates
    (obs_before,), (obs_after,) = ckpt["normalization"]["observation"], final["normalization"]["observation"]
    assert obs_after["count"] >= obs_before["count"] + 512  # statistics continued, not restarted
    assert ckpt["normalization"]["reward"][0]["count"] < final["normalization"]["reward"][0]["count"]

    tags = scalars(run.run_dir)
    steps = [step for tag, values in tags.items() if not tag.startswith("eval/") for step, _ in values]
    assert min(steps) > ckpt["global_step"] and max(steps) <= 1024
    assert tags["charts/learning_rate"] == [(768, 0.0), (1024, 0.0)]


def test_dqn_restores_weights_optimizer_steps_and_replay_buffer(resumed, smoke_runs):
    run, ckpt, _ = resumed["dqn"]
    assert run.returncode == 0, run.stderr[-3000:]
    final = load_checkpoint(run.run_dir / "dqn.cleanrl_model")
    assert final["global_step"] == 1500 and ckpt["global_step"] == 1000
    # Kept by default: every transition so far. On gymnasium 1.x the step after an episode's end only
    # resets its env (next-step autoreset): that step is no transition.
    ends = [step for step, _ in scalars(smoke_runs["dqn"].run_dir)["charts/episodic_return"]]
    resets = sum(step < 999 for step in ends) if NEXT_STEP_AUTORESET else 0
    assert ckpt["replay_buffer"]["size"] == 1000 - resets
    for key, tensor in ckpt["models"]["q_network"].items():
        assert torch.equal(final["models"]["q_network"][key], tensor), key
        # the target network kept being synced (every 100 steps) from the restored, unchanged q_network
        assert torch.equal(final["models"]["target_network"][key], tensor), key
    # the buffer came back, so learning goes on at once: updates at 1000, 1010, ..., 1490
    assert adam_steps(final["optimizers"]["optimizer"]) == adam_steps(ckpt["optimizers"]["optimizer"]) + 50
    tags = scalars(run.run_dir)
    assert min(step for step, _ in tags["losses/td_loss"]) == 1000
    assert min(step for step, _ in tags["charts/episodic_return"]) >= 1000
