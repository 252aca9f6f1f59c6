"""What the driver reports of each RLlib iteration: every finished episode (return, length), the
env steps per second, the learners' losses, each as a MOSAIC scalar (step: env steps sampled in
the run's lifetime) and into the run's TensorBoard files."""

from __future__ import annotations

from typing import Any

from mosaic_core.child import report_scalar
from ray_worker.callbacks import LENGTHS, RETURNS

LEARNING_RATES = ("curr_lr", "default_optimizer_learning_rate")


def lifetime_steps(result: dict[str, Any]) -> int | None:
    runners = result.get("env_runners") or {}
    value = runners.get("num_env_steps_sampled_lifetime", result.get("num_env_steps_sampled_lifetime"))
    return int(value) if isinstance(value, (int, float)) else None


def _series(runners: dict[str, Any], key: str) -> list[float]:
    found = runners.get(key)  # RLlib keeps "a/b" keys flat, and reduces a series of one to its item
    if isinstance(found, (list, tuple)):
        return [float(v) for v in found]
    return [float(found)] if isinstance(found, (int, float)) and not isinstance(found, bool) else []


def _learner_scalars(result: dict[str, Any]) -> dict[str, float]:
    policy = (result.get("learners") or {}).get("default_policy") or {}
    scalars = {}
    for name, value in policy.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if name in LEARNING_RATES:
            scalars["charts/learning_rate"] = float(value)
        elif "loss" in name or "entropy" in name or name.endswith("kl") or name in ("alpha_value", "mean_kl_loss"):
            scalars[f"losses/{name}"] = float(value)
    return scalars


class Reporter:
    """Reports each iteration's result; ``writer``: a TensorBoard SummaryWriter (or None)."""

    def __init__(self, writer: Any, step: int = 0):
        self.writer = writer
        self._add_scalar = getattr(type(writer).add_scalar, "__wrapped__", type(writer).add_scalar) if writer else None
        self.step = step
        self.episodes = 0

    def scalar(self, tag: str, value: float, step: int) -> None:
        report_scalar(tag, value, step)
        if self._add_scalar is not None:  # past the host's patch: reported once, above
            self._add_scalar(self.writer, tag, value, step)

    def iteration(self, result: dict[str, Any], learning: bool = True) -> int | None:
        """Report ``result``; returns the lifetime env steps, None when the iteration sampled
        nothing. ``learning=False``: the episodes of an iteration sampled with weights from
        before a restore are left out of the curves."""
        runners = result.get("env_runners")
        steps = lifetime_steps(result)
        if not runners or steps is None or steps <= self.step:
            return None
        previous, self.step = self.step, steps
        returns, lengths = _series(runners, RETURNS), _series(runners, LENGTHS)
        if learning:
            for index, (ret, length) in enumerate(zip(returns, lengths)):
                at = previous + (index + 1) * (steps - previous) // len(returns)
                self.scalar("charts/episodic_return", ret, at)
                self.scalar("charts/episodic_length", length, at)
        self.episodes += len(returns)
        seconds = result.get("time_this_iter_s")
        if isinstance(seconds, (int, float)) and seconds > 0:
            self.scalar("charts/SPS", (steps - previous) / seconds, steps)
        mean = runners.get("episode_return_mean")
        if learning and isinstance(mean, (int, float)):
            self.scalar("rllib/episode_return_mean", float(mean), steps)
        for tag, value in _learner_scalars(result).items():
            self.scalar(tag, value, steps)
        return steps
