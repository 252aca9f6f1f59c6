"""The PettingZoo envs a match plays, by the name their module gives them (``tictactoe_v3``): turn-based
(AEC) board games and simultaneous-move (parallel) MPE envs. PettingZoo is imported only when a
game is made."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from mosaic_arena.operators import Seat

__all__ = ["GAMES", "Game", "find_game", "legal_mask", "seats_of"]


@dataclass(frozen=True)
class Game:
    name: str  # "tictactoe_v3"
    module: str  # "pettingzoo.classic.tictactoe_v3"
    turn_based: bool  # an AEC env (one seat moves at a time); else a parallel env

    def make(self, render_mode: str | None = None) -> Any:
        """A fresh env of this game (AEC or parallel), or :class:`ImportError` without the arena extra."""
        module = _import(self.module)
        return module.env(render_mode=render_mode) if self.turn_based else module.parallel_env(render_mode=render_mode)


GAMES = {
    game.name: game
    for game in (
        Game("tictactoe_v3", "pettingzoo.classic.tictactoe_v3", True),
        Game("connect_four_v3", "pettingzoo.classic.connect_four_v3", True),
        Game("simple_spread_v3", "pettingzoo.mpe.simple_spread_v3", False),
        Game("simple_push_v3", "pettingzoo.mpe.simple_push_v3", False),  # adversary against agent
    )
}


def find_game(name: str) -> Game:
    """The game ``name``, or :class:`~mosaic_arena.operators.OperatorError` naming the known ones."""
    from mosaic_arena.operators import OperatorError

    game = GAMES.get(name)
    if game is None:
        raise OperatorError(f"unknown env {name!r}: mosaic match plays {', '.join(GAMES)}")
    try:
        _import(game.module)
    except ImportError as exc:
        raise OperatorError(f"env {name}: {exc} (install the arena extra: pip install -e '.[arena]')") from None
    return game


def _import(module: str) -> Any:
    """A game's module, its renderer (pygame) headless and quiet (no display, no audio device)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    return importlib.import_module(module)


def seats_of(game: Game) -> dict[str, Seat]:
    """Every seat of ``game``, in the env's agent order."""
    env = game.make()
    try:
        env.reset(seed=0)
        agents = list(env.possible_agents)
        return {
            agent: Seat(game.name, agent, env.observation_space(agent), env.action_space(agent), game.turn_based)
            for agent in agents
        }
    finally:
        env.close()


def legal_mask(observation: Any, info: dict[str, Any]) -> Any:
    """The seat's legal actions (an array of 0/1), from the observation's or the info's ``action_mask``;
    None when the env has none (every action in the space is legal)."""
    if isinstance(observation, dict) and "action_mask" in observation:
        return observation["action_mask"]
    return info.get("action_mask") if isinstance(info, dict) else None
