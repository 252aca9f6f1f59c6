"""Who plays which agent in a multi-agent RLlib run, in the worker's environment: RLlib's modules
(one per policy) and its policy mapping, from the run's setup (:func:`ray_worker.multiagent.setup`).

- ``policies: "shared"`` (the default): one module, ``default_policy``, plays every agent;
- ``"separate"``: one module per agent, named by its id;
- ``{AGENT_ID: NAME}``: the agents named alike share a module;
- ``self_play``: ``main`` (trained) takes one seat, alternating between episodes, and the other
  seats are played by a snapshot of ``main`` drawn from a pool each episode (:mod:`ray_worker.selfplay`).
  In a competitive MPE env the agents form sides by their role (``adversary_0`` and ``agent_0`` of
  ``simple_push_v3``: the id before its number), each side its own ``main_SIDE`` and pool: one side's
  main learns in an episode, alternating, against the other sides' snapshots.

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


def pool_modules(pool_size: int, side: str = "") -> list[str]:
    """A side's pool of past policies (``pool_0``...; ``pool_SIDE_0``... for a side of an MPE env)."""
    return [f"pool_{side}_{i}" if side else f"pool_{i}" for i in range(pool_size)]


def main_module(side: str = "") -> str:
    """The trained policy of a side (``main``; ``main_SIDE`` for a side of an MPE env)."""
    return f"{MAIN}_{side}" if side else MAIN


def role(agent: str) -> str:
    """An agent's role: its id before its number (``adversary_0`` -> ``adversary``)."""
    head, _, number = agent.rpartition("_")
    return head if head and number.isdigit() else agent


def self_play_sides(env_id: str, agents: list[str]) -> dict[str, str]:
    """Each agent's side in self-play: ``""`` for every seat of a turn-based game (one ``main`` plays
    whichever seat), its role in a parallel env."""
    from ray_worker.pettingzoo_envs import is_turn_based

    return dict.fromkeys(agents, "") if is_turn_based(env_id) else {agent: role(agent) for agent in agents}


def sides_of(setup: dict[str, Any]) -> list[str]:
    """The sides a self-play setup (as the env config carries it) trains, ``[""]`` for a board game's."""
    return sorted(set((setup.get("sides") or {"": ""}).values()))


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
        two_players = is_turn_based(env_id) and len(agents) == 2
        if not two_players and len(set(self_play_sides(env_id, agents).values())) < 2:
            return [
                "extras.self_play needs a two-player turn-based game (e.g. classic/tictactoe_v3) or an MPE env "
                f"of opposing sides (e.g. mpe/simple_push_v3: adversary against agent); {env_id} is neither"
            ]
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
    """In each episode one learner plays its side's ``main`` and every other agent a snapshot of its
    own side's, drawn from the pool: the learner is one seat of a board game, alternating between
    episodes, or one side of an MPE env; both drawn from the episode's id, so an episode's agents agree."""

    def __init__(self, sides: dict[str, str], pool_size: int):
        self.sides, self.pool_size = dict(sides), pool_size
        self.seats = len(set(sides.values())) == 1  # a board game: the seats take turns at learning
        self.learners = list(sides) if self.seats else sorted(set(sides.values()))

    def __call__(self, agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
        draw = zlib.crc32(str(getattr(episode, "id_", "")).encode())
        agent = str(agent_id)
        side = self.sides[agent]
        if self.learners.index(agent if self.seats else side) == draw % len(self.learners):
            return main_module(side)
        return pool_modules(self.pool_size, side)[(draw // len(self.learners)) % self.pool_size]


def configure(config: Any, env_id: str, setup: dict[str, Any]) -> dict[str, Any]:
    """Set ``config``'s modules and mapping for ``env_id``; returns the setup as the env config carries it."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ray_worker.pettingzoo_envs import agents_of, is_turn_based

    agents = agents_of(env_id)
    self_play = setup.get(SELF_PLAY)
    if self_play:
        sides = self_play_sides(env_id, agents)
        trained = [main_module(side) for side in sorted(set(sides.values()))]
        modules = trained + [
            m for side in sorted(set(sides.values())) for m in pool_modules(self_play["pool_size"], side)
        ]
        mapping: Any = SelfPlayMapping(sides, self_play["pool_size"])
        carried = {
            "agents": {a: main_module(side) for a, side in sides.items()},
            "self_play": self_play,
            "sides": sides,
        }
    else:
        by_agent = agent_modules(agents, setup.get(POLICIES))
        modules = trained = sorted(set(by_agent.values()))
        mapping, carried = AgentMapping(by_agent), {"agents": by_agent}
    module_class = None  # RLlib's default module of the algorithm
    if is_turn_based(env_id):
        from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

        module_class = ActionMaskingTorchRLModule
    config.multi_agent(policies=set(modules), policy_mapping_fn=mapping, policies_to_train=trained)
    spaces = module_spaces(env_id, _representatives(modules, carried))
    specs = {
        module: RLModuleSpec(
            module_class=module_class, observation_space=spaces[module][0], action_space=spaces[module][1]
        )
        for module in modules
    }
    config.rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
    return carried


def _representatives(modules: list[str], carried: dict[str, Any]) -> dict[str, str]:
    """An agent each module plays (a pool module: an agent of its side), whose spaces it takes."""
    found = {module: agent for agent, module in carried["agents"].items()}
    for agent, side in (carried.get("sides") or {}).items():
        for module in modules:
            if module.startswith(f"pool_{side}_" if side else "pool_") and module not in found:
                found[module] = agent
    return found


def module_spaces(env_id: str, representatives: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    """Each module's (observation space, action space): its agent's, as the worker's env wrapper gives
    them. Set on each module: RLlib's own guess maps agents through the mapping without an episode,
    which in self-play reaches one pool slot of each side only."""
    from ray_worker.envs import ENV_ID_KEY
    from ray_worker.pettingzoo_envs import make_env

    env = make_env({ENV_ID_KEY: env_id})
    try:
        observations, actions = env.observation_spaces or {}, env.action_spaces or {}
        return {m: (observations[a], actions[a]) for m, a in representatives.items()}
    finally:
        env.close()


def carried_setup(config: Any) -> dict[str, Any]:
    """The run's multi-agent setup in ``config``'s env config (``{}``: a single-agent run)."""
    found = (getattr(config, "env_config", None) or {}).get(SETUP_KEY)
    return found if isinstance(found, dict) else {}


def module_agents(config: Any) -> dict[str, str]:
    """A multi-agent run's modules, each with the agent it plays (its own name when it plays several)."""
    by_agent = carried_setup(config).get("agents") or {}
    modules = list(by_agent.values())
    return {module: agent if modules.count(module) == 1 else module for agent, module in by_agent.items()}
