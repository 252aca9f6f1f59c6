"""A multi-agent run's policies playing PettingZoo games, in the worker's environment, without Ray.

:func:`load_policy` serves one seat from a checkpoint (one function: checkpoint -> ``act(observation,
info)``, the action mask obeyed), for ``mosaic evaluate`` here and for any other caller that seats
a trained policy. :func:`evaluate` plays a run's evaluation: in a two-player turn-based game the
trained policy against a uniformly random legal-move opponent, alternating seats, one contract seed
per game, with wins, draws and losses and their 95 % Wilson intervals; in any other env every seat
its own trained policy (a team's return, each agent's).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ray_worker.checkpoints import multiagent_setup
from ray_worker.pettingzoo_envs import MASK, is_turn_based, masked_observation, pettingzoo_env
from ray_worker.teams import SHARED_MODULE

MODULES = Path("learner_group") / "learner" / "rl_module"  # an RLlib checkpoint's modules, one folder each
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
OUTCOMES = ("win", "draw", "loss")


class Seat(Protocol):
    def act(self, observation: Any, info: dict[str, Any] | None = None) -> Any: ...


class Policy:
    """A trained RLlib module playing one seat, deterministically (its most likely legal action)."""

    def __init__(self, module: Any, turn_based: bool):
        self.module, self.turn_based = module, turn_based

    def act(self, observation: Any, info: dict[str, Any] | None = None) -> Any:
        import torch

        batch: Any = (
            {k: torch.as_tensor(v)[None] for k, v in masked_observation(observation).items()}
            if self.turn_based
            else torch.as_tensor(np.asarray(observation, dtype=np.float32))[None]
        )
        with torch.no_grad():
            logits = self.module.forward_inference({"obs": batch})["action_dist_inputs"]
        distribution = self.module.get_inference_action_dist_cls().from_logits(logits)
        action = distribution.to_deterministic().sample()[0].numpy()
        return int(action) if action.ndim == 0 else action


class RandomLegal:
    """A uniformly random legal move (the action mask's, in the observation or the info)."""

    def __init__(self, seed: int, actions: int = 0):
        self.rng, self.actions = np.random.default_rng(seed), actions  # actions: how many, for an env without masks

    def act(self, observation: Any, info: dict[str, Any] | None = None) -> int:
        mask = observation.get(MASK) if isinstance(observation, dict) else (info or {}).get(MASK)
        legal = np.flatnonzero(np.asarray(mask)) if mask is not None else np.arange(self.actions)
        return int(self.rng.choice(legal))


def load_policy(checkpoint: Path, agent: str) -> Policy:
    """The policy that plays ``agent`` in a run's RLlib ``checkpoint`` (its module only: no
    algorithm, no Ray): the module a multi-agent run maps to ``agent``, a single-agent run's one
    module for any agent. Loading unpickles the module's class: the caller checks whose it is."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    setup = multiagent_setup(checkpoint)
    module_id = (setup.get("agents") or {}).get(agent) if setup else SHARED_MODULE
    if module_id is None:
        raise ValueError(f"{checkpoint} has no policy for agent {agent!r}")
    module: Any = RLModule.from_checkpoint(str(checkpoint / MODULES / module_id))  # a torch module too
    module.eval()
    return Policy(module, is_turn_based(step_env(checkpoint)))


def step_env(checkpoint: Path) -> str:
    import json

    from ray_worker.checkpoints import STEP_FILE

    return str(json.loads((checkpoint / STEP_FILE).read_text(encoding="utf-8"))["env_id"])


def play(
    env_id: str, seats: dict[str, Seat], seed: int, frames: list[Any] | None = None
) -> tuple[dict[str, float], int]:
    """One episode; (each agent's return, its length in moves or steps). ``frames``: rendered into."""
    env = pettingzoo_env(env_id, {"render_mode": "rgb_array"} if frames is not None else None)
    try:
        return (_turns if is_turn_based(env_id) else _parallel)(env, seats, seed, frames)
    finally:
        env.close()


def _turns(env: Any, seats: dict[str, Seat], seed: int, frames: list[Any] | None) -> tuple[dict[str, float], int]:
    env.reset(seed=seed)
    returns, moves = dict.fromkeys(env.possible_agents, 0.0), 0
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        returns[agent] += float(reward)
        done = terminated or truncated
        env.step(None if done else seats[agent].act(observation, info))
        moves += 0 if done else 1
        _frame(env, frames)
    return returns, moves


def _parallel(env: Any, seats: dict[str, Seat], seed: int, frames: list[Any] | None) -> tuple[dict[str, float], int]:
    observations, infos = env.reset(seed=seed)
    returns, steps = dict.fromkeys(env.possible_agents, 0.0), 0
    while env.agents:
        actions = {a: seats[a].act(observations[a], infos.get(a)) for a in env.agents}
        observations, rewards, _, _, infos = env.step(actions)
        steps += 1
        for agent, reward in rewards.items():
            returns[agent] += float(reward)
        _frame(env, frames)
    return returns, steps


def _frame(env: Any, frames: list[Any] | None) -> None:
    if frames is not None:
        image = env.render()
        if image is not None:
            frames.append(np.ascontiguousarray(image, dtype=np.uint8))


def wilson(successes: int, games: int) -> list[float]:
    """The 95 % Wilson score interval of a proportion."""
    if games == 0:
        return [0.0, 1.0]
    rate, z2 = successes / games, Z95 * Z95
    centre = (rate + z2 / (2 * games)) / (1 + z2 / games)
    half = Z95 * math.sqrt(rate * (1 - rate) / games + z2 / (4 * games * games)) / (1 + z2 / games)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def outcome(own: float, other: float) -> str:
    return "win" if own > other else "loss" if own < other else "draw"


def outcomes(results: list[str]) -> dict[str, Any]:
    """Counts, rates and 95 % Wilson intervals of wins, draws and losses."""
    games = len(results)
    return {
        name: {
            "count": results.count(name),
            "rate": results.count(name) / games,
            "ci95": wilson(results.count(name), games),
        }
        for name in OUTCOMES
    } | {"games": games, "interval": "wilson"}


def evaluate(
    checkpoint: Path, *, algo_name: str, env_id: str, global_step: int, seeds: list[int], video: Path | None = None
) -> dict[str, Any]:
    """The ``mosaic.eval/1`` result of one episode per seed (``video``: the first as an MP4); against
    ``random`` in a two-player turn-based game (``opponent``, ``outcomes``; each episode's ``seat``
    and ``outcome``)."""
    from mosaic_core import contract

    by_agent = multiagent_setup(checkpoint).get("agents") or {}
    agents, loaded = list(by_agent), dict[str, Policy]()
    for agent, module in by_agent.items():  # a policy that plays several agents is loaded once
        loaded.setdefault(module, load_policy(checkpoint, agent))
    policies: dict[str, Seat] = {agent: loaded[module] for agent, module in by_agent.items()}
    against_random = is_turn_based(env_id) and len(agents) == 2
    frames: list[Any] | None = [] if video is not None else None
    returns, lengths, per_agent, seats, results = [], [], [], [], []
    for index, seed in enumerate(seeds):
        table = dict(policies)
        if against_random:  # the trained policy's seat alternates; a random legal mover takes the other
            seat, other = agents[index % 2], agents[1 - index % 2]
            table[other] = RandomLegal(seed)
        got, length = play(env_id, table, seed, frames if index == 0 else None)
        per_agent.append(got)
        lengths.append(length)
        if against_random:
            seats.append(seat)
            results.append(outcome(got[seat], got[other]))
            returns.append(got[seat])
        else:
            returns.append(sum(got.values()))
    extra = {"opponent": "random", "outcomes": outcomes(results)} if against_random else None
    result = contract.eval_result(
        worker="rllib",
        algo=algo_name,
        env_id=env_id,
        checkpoint=str(checkpoint),
        global_step=global_step,
        returns=returns,
        lengths=lengths,
        seeds=seeds,
        deterministic=True,
        agent_returns=per_agent,
        extra=extra,
    )
    for episode, seat, result_of in zip(result["episodes"], seats, results):
        episode.update(seat=seat, outcome=result_of)
    if video is not None and frames:
        contract.write_mp4(video, frames)
    return result
