"""The arena's gymnasium ids, registered by gymnasium itself on ``import gymnasium`` (its ``gymnasium.envs``
entry-point group, namespace ``mosaic``): a single-agent view of a board game whose other seat is filled
by an operator (:class:`mosaic_arena.seated.SeatedEnv`). Registering imports nothing (the env's class is
named by a string), so every process that imports gymnasium pays nothing for it.

- ``mosaic/TicTacToe-vs-random-v0``, ``mosaic/ConnectFour-vs-random-v0``: the learner plays either seat,
  drawn for each episode (its observation is the board from its own side, so one policy plays both);
- ``mosaic/TicTacToe-as-player_1-vs-random-v0`` (and ``player_2``, and Connect Four's): always that seat.

Gymnasium 1.x no longer loads this group: there ``import mosaic_arena.gym_ids`` before ``gym.make``
(``mosaic_arena.gym_ids:mosaic/TicTacToe-vs-random-v0`` as the env id does it).
"""

from __future__ import annotations

__all__ = ["ENV_IDS", "register_envs"]

ENTRY_POINT = "mosaic_arena.seated:SeatedEnv"
_BOARDS = {"TicTacToe": "tictactoe_v3", "ConnectFour": "connect_four_v3"}
_SEATS_OF = {"tictactoe_v3": ("player_1", "player_2"), "connect_four_v3": ("player_0", "player_1")}


def _ids() -> dict[str, dict[str, str]]:
    """Each id (without the namespace) and the keyword arguments it makes its env with."""
    ids = {}
    for title, game in _BOARDS.items():
        ids[f"{title}-vs-random-v0"] = {"game": game, "seat": "any", "opponent": "random"}
        for seat in _SEATS_OF[game]:
            ids[f"{title}-as-{seat}-vs-random-v0"] = {"game": game, "seat": seat, "opponent": "random"}
    return ids


ENV_IDS = {f"mosaic/{name}": kwargs for name, kwargs in _ids().items()}


def register_envs() -> None:
    """Register every id in the ``mosaic`` namespace (once; gymnasium calls this in that namespace)."""
    from gymnasium.envs.registration import register, registry

    for env_id, kwargs in ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs=kwargs)


if __name__ != "__main__":  # `mosaic_arena.gym_ids:ID` (gymnasium imports the module first) registers too
    try:
        register_envs()
    except ImportError:  # no gymnasium: nothing to register into
        pass
