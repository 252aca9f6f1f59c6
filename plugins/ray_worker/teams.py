"""Who plays which agent in a multi-agent RLlib run, in the worker's environment: RLlib's modules
(one per policy) and its policy mapping, from the run's setup (:func:`ray_worker.multiagent.setup`).

- ``policies: "shared"`` (the default): one module, ``default_policy``, plays every agent;
- ``"separate"``: one module per agent, named by its id;
- ``{AGENT_ID: NAME}``: the agents named alike share a module;
- ``self_play``: ``main`` (trained) takes one seat, alternating between episodes, and the other
  seats are played by a snapshot of ``main`` drawn from a pool each episode (:mod:`ray_worker.selfplay`).

Turn-based envs' modules are RLlib's action-masking PPO module (illegal moves get no probability).
The setup travels in the env config (:data:`SETUP_KEY`), as data, to the callbacks and checkpoints.
"""

from __future__ import annotations

import zlib
from typing import Any

from ray_worker.multiagent import POLICIES, SELF_PLAY, SEPARATE, SHARED

SETUP_KEY = "mosaic_multiagent"  # in the env config: {"agents": {AGENT: MODULE}, "self_play": {...}}
SHARED_MODULE = "default_policy"
MAIN = "main"
MULTIAGENT_ALGOS = ("PPO",)  # the action-masking module is RLlib's PPO module


def pool_modules(pool_size: int) -> list[str]:
    return [f"pool_{i}" for i in range(pool_size)]


def agent_modules(agents: list[str], policies: Any) -> dict[str, str]:
    """Each agent's module; a ValueError naming an agent the env does not have, or one left out."""
    if policies in (None, SHARED):
        return dict.fromkeys(agents, SHARED_MODULE)
    if policies == SEPARATE:
        return {agent: agent for agent in agents}
    unknown = [agent for agent in policies if agent not in agents]
    if unknown:
        raise ValueError(
            f"extras.policies.{unknown[0]}: the env has no agent {unknown[0]!r} (its agents: {', '.join(agents)})"
        )
    missing = [agent for agent in agents if agent not in policies]
    if missing:
        raise ValueError(
            f"extras.policies names no policy for agent {missing[0]!r} (the env's agents: {', '.join(agents)})"
        )
    return {agent: str(policies[agent]) for agent in agents}


def setup_problems(algo: str, env_id: str, setup: dict[str, Any]) -> list[str]:
    """What the worker cannot run of ``setup`` on ``env_id``, one sentence each."""
    from ray_worker.pettingzoo_envs import agents_of, is_turn_based

    if algo not in MULTIAGENT_ALGOS:
        return [
            f"{algo} on a multi-agent env: the rllib worker trains PettingZoo envs with {', '.join(MULTIAGENT_ALGOS)}"
        ]
    agents = agents_of(env_id)
    if SELF_PLAY in setup:
        if not is_turn_based(env_id) or len(agents) != 2:
            return [f"extras.self_play needs a two-player turn-based game (e.g. classic/tictactoe_v3); {env_id} is not"]
        return []
    try:
        agent_modules(agents, setup.get(POLICIES))
    except ValueError as exc:
        return [str(exc)]
    return []


class AgentMapping:
    """RLlib's policy mapping: each agent to its module."""

    def __init__(self, modules: dict[str, str]):
        self.modules = dict(modules)

    def __call__(self, agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
        return self.modules[str(agent_id)]


class SelfPlayMapping:
    """``main`` in one seat (which one alternates with the episode), a pool snapshot in the other,
    drawn per episode: both from the episode's id, so an episode's agents agree."""

    def __init__(self, agents: list[str], pool_size: int):
        self.agents, self.pool_size = list(agents), pool_size

    def __call__(self, agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
        draw = zlib.crc32(str(getattr(episode, "id_", "")).encode())
        if self.agents.index(str(agent_id)) == draw % len(self.agents):
            return MAIN
        return pool_modules(self.pool_size)[(draw // len(self.agents)) % self.pool_size]


def configure(config: Any, env_id: str, setup: dict[str, Any]) -> dict[str, Any]:
    """Set ``config``'s modules and mapping for ``env_id``; returns the setup as the env config carries it."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ray_worker.pettingzoo_envs import agents_of, is_turn_based

    agents = agents_of(env_id)
    self_play = setup.get(SELF_PLAY)
    if self_play:
        modules, trained = [MAIN, *pool_modules(self_play["pool_size"])], [MAIN]
        mapping: Any = SelfPlayMapping(agents, self_play["pool_size"])
        carried = {"agents": dict.fromkeys(agents, MAIN), "self_play": self_play}
    else:
        by_agent = agent_modules(agents, setup.get(POLICIES))
        modules = trained = sorted(set(by_agent.values()))
        mapping, carried = AgentMapping(by_agent), {"agents": by_agent}
    module_class = None  # RLlib's default module of the algorithm
    if is_turn_based(env_id):
        from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

        module_class = ActionMaskingTorchRLModule
    config.multi_agent(policies=set(modules), policy_mapping_fn=mapping, policies_to_train=trained)
    specs = {module: RLModuleSpec(module_class=module_class) for module in modules}
    config.rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
    return carried


def carried_setup(config: Any) -> dict[str, Any]:
    """The run's multi-agent setup in ``config``'s env config (``{}``: a single-agent run)."""
    found = (getattr(config, "env_config", None) or {}).get(SETUP_KEY)
    return found if isinstance(found, dict) else {}


def module_agents(config: Any) -> dict[str, str]:
    """A multi-agent run's modules, each with the agent it plays (its own name when it plays several)."""
    by_agent = carried_setup(config).get("agents") or {}
    modules = list(by_agent.values())
    return {module: agent if modules.count(module) == 1 else module for agent, module in by_agent.items()}
