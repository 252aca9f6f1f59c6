"""One episode of a match in lock-step: every seat's operator asked in turn (an AEC game) or all at
once (a parallel one), each action checked against its seat's space and legal-action mask.

An illegal action (outside the seat's space, or masked out) is a forfeit: the env is not stepped,
the episode ends there, that seat loses and the others win; its returns are what the game paid
until then. A seat whose operator is gone (:class:`~mosaic_arena.operators.SeatLeft`: a person left)
forfeits the same way, its record saying why (``forfeit.left``). Otherwise outcomes follow the
returns: the one highest return wins, a tie for the highest is a draw for those tied, the rest lose."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mosaic_arena.games import Game, legal_mask
from mosaic_arena.operators import Operator, Seat, SeatLeft

__all__ = ["SeatTally", "play_episode", "seat_seeds"]


@dataclass
class SeatTally:
    """One seat's record over a match (``match.json``'s ``seats.NAME``)."""

    operator: str
    returns: list[float] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    illegal_actions: int = 0
    forfeits: int = 0  # games lost by an illegal action
    actions: int = 0
    act_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "returns": self.returns,
            "outcomes": self.outcomes,
            "wins": self.outcomes.count("win"),
            "losses": self.outcomes.count("loss"),
            "draws": self.outcomes.count("draw"),
            "forfeits": self.forfeits,
            "illegal_actions": self.illegal_actions,
            "actions": self.actions,
            "mean_time_per_action_s": self.act_seconds / self.actions if self.actions else None,
        }


def seat_seeds(seed: int, agents: list[str]) -> dict[str, int]:
    """Each seat's operator seed for an episode of env seed ``seed``: distinct per seat, recorded."""
    states = np.random.SeedSequence(seed).spawn(len(agents))
    return {agent: int(state.generate_state(1)[0]) for agent, state in zip(agents, states)}


class _Episode:
    def __init__(self, seats: dict[str, Seat], operators: dict[str, Operator], tallies: dict[str, SeatTally]):
        self.seats, self.operators, self.tallies = seats, operators, tallies
        self.returns = dict.fromkeys(seats, 0.0)
        self.forfeit: str | None = None
        self.illegal: Any = None
        self.left: str | None = None

    def ask(self, agent: str, observation: Any, info: dict[str, Any]) -> tuple[Any, bool]:
        """The seat's action and whether it is legal (a seat whose operator left: not)."""
        started = time.perf_counter()
        try:
            action = self.operators[agent].act(observation, info)
        except SeatLeft as exc:
            self.forfeit, self.left = agent, str(exc)
            return None, False
        tally = self.tallies[agent]
        tally.act_seconds += time.perf_counter() - started
        tally.actions += 1
        if _legal(self.seats[agent].action_space, legal_mask(observation, info), action):
            return action, True
        tally.illegal_actions += 1
        self.forfeit, self.illegal = agent, _shown(action)
        return action, False

    def add(self, rewards: dict[str, Any]) -> None:
        for agent, reward in rewards.items():
            self.returns[agent] = self.returns.get(agent, 0.0) + float(reward)

    def result(self, seed: int, seeds: dict[str, int], steps: int) -> dict[str, Any]:
        outcomes = _outcomes(self.returns, self.forfeit)
        for agent, tally in self.tallies.items():
            tally.returns.append(self.returns[agent])
            tally.outcomes.append(outcomes[agent])
        episode: dict[str, Any] = {"seed": seed, "seat_seeds": seeds, "steps": steps, "returns": self.returns}
        episode["outcomes"] = outcomes
        if self.forfeit is not None:
            self.tallies[self.forfeit].forfeits += 1
            forfeit = {"seat": self.forfeit, "action": self.illegal}
            episode["forfeit"] = forfeit if self.left is None else {**forfeit, "left": self.left}
        return episode


def play_episode(
    game: Game,
    env: Any,
    seats: dict[str, Seat],
    operators: dict[str, Operator],
    tallies: dict[str, SeatTally],
    seed: int,
    on_turn: Callable[[str | None], None] | None = None,
) -> dict[str, Any]:
    """Play one episode of env seed ``seed``; the episode's record (tallies updated). ``on_turn(agent)``
    is called before each seat is asked, and ``on_turn(None)`` when the game is over (a viewer's frames)."""
    seeds = seat_seeds(seed, list(seats))
    for agent, operator in operators.items():
        operator.reset(seeds[agent])
    episode = _Episode(seats, operators, tallies)
    watch = on_turn or (lambda agent: None)
    steps = _turns(env, episode, seed, watch) if game.turn_based else _rounds(env, episode, seed, watch)
    watch(None)
    return episode.result(seed, seeds, steps)


def _turns(env: Any, episode: _Episode, seed: int, watch: Callable[[str | None], None]) -> int:
    env.reset(seed=seed)
    steps = 0
    for agent in env.agent_iter():
        observation, _reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)  # a finished seat leaves the game
            continue
        watch(agent)
        action, legal = episode.ask(agent, observation, info)
        if not legal:
            break
        env.step(action)
        steps += 1
        episode.add(env.rewards)
    return steps


def _rounds(env: Any, episode: _Episode, seed: int, watch: Callable[[str | None], None]) -> int:
    observations, infos = env.reset(seed=seed)
    steps = 0
    while env.agents:
        actions = {}
        for agent in env.agents:
            watch(agent)
            actions[agent], legal = episode.ask(agent, observations[agent], infos.get(agent, {}))
            if not legal:
                return steps
        observations, rewards, _terminated, _truncated, infos = env.step(actions)
        steps += 1
        episode.add(rewards)
    return steps


def _legal(space: Any, mask: Any, action: Any) -> bool:
    try:
        if not space.contains(action):
            return False
    except Exception:  # an action of a type the space cannot even compare
        return False
    return mask is None or bool(np.asarray(mask)[int(action)])


def _outcomes(returns: dict[str, float], forfeit: str | None) -> dict[str, str]:
    if forfeit is not None:
        return {agent: "loss" if agent == forfeit else "win" for agent in returns}
    best = max(returns.values())
    leaders = [agent for agent, value in returns.items() if value == best]
    return {agent: ("win" if len(leaders) == 1 else "draw") if agent in leaders else "loss" for agent in returns}


def _shown(action: Any) -> Any:
    """An illegal action as JSON (bounded)."""
    if isinstance(action, (bool, int, float, str)) or action is None:
        return action if not isinstance(action, str) else action[:100]
    if isinstance(action, np.generic):
        return action.item()
    return repr(action)[:100]
