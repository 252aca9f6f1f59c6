"""What the driver reports of each RLlib iteration: every finished episode (return, length), the
env steps per second, the learners' losses, each as a MOSAIC scalar (step: env steps sampled in
the run's lifetime) and into the run's TensorBoard files."""

from __future__ import annotations

from typing import Any

from mosaic_core.child import report_scalar
from ray_worker.callbacks import AGENT_RETURNS, LENGTHS, MAIN_RETURNS, RETURNS

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


def _learner_scalars(result: dict[str, Any], agents: dict[str, str]) -> list[tuple[str, float, str | None]]:
    """(tag, value, agent) of each trained module's losses: ``default_policy``'s and self-play's
    ``main``'s as the run's, another's as its agent's (``agents``: module -> the agent it plays, or
    the module's name when it plays several); the learning rate once."""
    scalars: list[tuple[str, float, str | None]] = []
    rate = None
    for module, values in sorted((result.get("learners") or {}).items()):
        own = module in ("default_policy", "main") or module in agents  # not __all_modules__ nor a pool's
        if not own or not isinstance(values, dict):
            continue
        agent = None if module in ("default_policy", "main") else agents.get(module, module)
        for name, value in values.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if name in LEARNING_RATES:
                rate = float(value) if rate is None else rate
            elif "loss" in name or "entropy" in name or name.endswith("kl") or name in ("alpha_value", "mean_kl_loss"):
                scalars.append((f"losses/{name}", float(value), agent))
    return scalars + ([("charts/learning_rate", rate, None)] if rate is not None else [])


def _agent_series(runners: dict[str, Any]) -> dict[str, list[float]]:
    return {key[len(AGENT_RETURNS) :]: _series(runners, key) for key in runners if key.startswith(AGENT_RETURNS)}


class Reporter:
    """Reports each iteration's result; ``writer``: a TensorBoard SummaryWriter (or None)."""

    def __init__(self, writer: Any, step: int = 0, agents: dict[str, str] | None = None):
        self.writer = writer
        self.agents = dict(agents or {})  # module -> the agent it plays (a multi-agent run's own modules)
        self._add_scalar = getattr(type(writer).add_scalar, "__wrapped__", type(writer).add_scalar) if writer else None
        self.step = step
        self.episodes = 0

    def scalar(self, tag: str, value: float, step: int, agent: str | None = None) -> None:
        """Report a scalar (an agent's as XuanCe's worker does: ``agent=``, and ``TAG/AGENT`` in TensorBoard)."""
        report_scalar(tag, value, step, agent=agent)
        if self._add_scalar is not None:  # past the host's patch: reported once, above
            self._add_scalar(self.writer, f"{tag}/{agent}" if agent else tag, value, step)

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
        if learning:
            self._multiagent(runners, steps)
        for tag, value, agent in _learner_scalars(result, self.agents):
            self.scalar(tag, value, steps, agent=agent)
        return steps

    def _multiagent(self, runners: dict[str, Any], steps: int) -> None:
        """Each agent's mean return this iteration; in self-play, ``main``'s and its win rate."""
        for agent, values in _agent_series(runners).items():
            if values:
                self.scalar("charts/episodic_return", sum(values) / len(values), steps, agent=agent)
        main = _series(runners, MAIN_RETURNS)
        if main:
            self.scalar("self_play/main_return", sum(main) / len(main), steps)
            self.scalar("self_play/win_rate", sum(v > 0 for v in main) / len(main), steps)
        for key in sorted(k for k in runners if k.startswith(f"{MAIN_RETURNS}/")):  # an MPE env's sides
            side = _series(runners, key)
            if side:
                self.scalar(f"self_play/main_return_{key[len(MAIN_RETURNS) + 1 :]}", sum(side) / len(side), steps)
