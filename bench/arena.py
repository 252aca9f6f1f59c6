"""What the arena's seats cost: env steps per second of a Tic-Tac-Toe match, run by hand.

    python bench/arena.py                         # trains a small PPO run first (4,096 steps)
    python bench/arena.py --run RUN_ID --runs-dir var/trainer/runs --games 500

(a) a bare PettingZoo loop: random legal actions straight from a numpy generator, no operators;
(b) a match with two ``random`` operators in process (``mosaic_arena.play``: the seat checks, the
tallies, the timing), and its ratio to (a);
(c) a match with two ``run:`` operators, each a CleanRL policy served from its own process (one JSON
line each way per action), and its ratio to (a);
(d) ``mosaic match`` as a user runs it (two ``random`` seats), whole: start-up and files included;
(e) ``mosaic league`` of 4 operators (``random``, two scripted ones, the ``run:``) x 100 games per
match (12 matches: each pairing in both seat orders), whole, with its standings' bootstrap.
Each figure is the best of ``--repeats``. Nothing here asserts: it prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GAME = "tictactoe_v3"
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # PettingZoo's renderer (pygame), headless and quiet
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def bare_loop(games: int) -> float:
    """Env steps per second of PettingZoo's own loop with random legal actions."""
    from pettingzoo.classic import tictactoe_v3

    env, rng, steps = tictactoe_v3.env(), np.random.default_rng(0), 0
    started = time.perf_counter()
    for game in range(games):
        env.reset(seed=game)
        for _agent in env.agent_iter():
            observation, _reward, terminated, truncated, _info = env.last()
            action = None if terminated or truncated else int(rng.choice(np.flatnonzero(observation["action_mask"])))
            env.step(action)
            steps += action is not None
    return steps / (time.perf_counter() - started)


def match_loop(games: int, specs: dict[str, str], runs_root: Path) -> float:
    """Env steps per second of a match of these operators, in this process (operators built first)."""
    from mosaic_arena.games import find_game, seats_of
    from mosaic_arena.play import SeatTally, play_episode
    from mosaic_arena.registry import operator_kinds, seat_operator

    game = find_game(GAME)
    seats = {name: dataclasses.replace(seat, runs_root=runs_root) for name, seat in seats_of(game).items()}
    kinds = operator_kinds()
    operators = {name: seat_operator(specs[name], seat, kinds) for name, seat in seats.items()}
    tallies = {name: SeatTally(specs[name]) for name in seats}
    env = game.make()
    try:
        started = time.perf_counter()
        steps = sum(play_episode(game, env, seats, operators, tallies, seed)["steps"] for seed in range(games))
        return steps / (time.perf_counter() - started)
    finally:
        env.close()
        for operator in operators.values():
            operator.close()


def whole_command(games: int, runs_root: Path) -> float:
    """Wall seconds of ``mosaic match`` with two random seats, start to end."""
    mosaic = Path(sys.executable).parent / "mosaic"
    seats = ["--seat", "player_1=random", "--seat", "player_2=random"]
    started = time.perf_counter()
    subprocess.run(
        [str(mosaic), "match", GAME, *seats, "--episodes", str(games), "--runs-dir", str(runs_root)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


LEAGUE = """
name = "{name}"
env = "tictactoe_v3"
games = {games}
[operators]
random = "random"
first-legal = "scripted:first-legal"
always-zero = "scripted:always-zero"
policy = "run:{run}"
"""


def whole_league(run: str, games: int, runs_root: Path, scratch: Path) -> float:
    """Wall seconds of a fresh ``mosaic league`` of 4 operators (the scripted ones: the example package's)."""
    mosaic = Path(sys.executable).parent / "mosaic"
    spec = scratch / f"league-{time.monotonic_ns()}.toml"
    spec.write_text(LEAGUE.format(name=spec.stem, games=games, run=run))
    started = time.perf_counter()
    subprocess.run(
        [str(mosaic), "league", str(spec), "--runs-dir", str(runs_root)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def train(runs_root: Path) -> str:
    mosaic = Path(sys.executable).parent / "mosaic"
    command = [str(mosaic), "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "mosaic/TicTacToe-vs-random-v0"]
    command += ["--total-timesteps", "4096", "--run-id", "bench-ttt", "--runs-dir", str(runs_root), "--quiet"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return "bench-ttt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run", help="a CleanRL run trained in a Tic-Tac-Toe seat (default: train one)")
    parser.add_argument("--runs-dir", type=Path)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-arena-") as scratch:
        runs_root = (ns.runs_dir or Path(scratch) / "runs").absolute()
        run = ns.run or train(runs_root)
        best = lambda measure: max(measure() for _ in range(ns.repeats))
        bare = best(lambda: bare_loop(ns.games))
        random_match = best(lambda: match_loop(ns.games, {"player_1": "random", "player_2": "random"}, runs_root))
        served = best(lambda: match_loop(ns.games, {"player_1": f"run:{run}", "player_2": f"run:{run}"}, runs_root))
        whole = min(whole_command(ns.games, runs_root) for _ in range(ns.repeats))
        league = whole_league(run, 100, runs_root, Path(scratch))
    print(f"{GAME}, {ns.games} games, best of {ns.repeats}:")
    print(f"  (a) bare PettingZoo loop          {bare:10,.0f} steps/s")
    print(
        f"  (b) match, 2 random operators     {random_match:10,.0f} steps/s  ({random_match / bare:.2f}x the bare loop)"
    )
    print(f"  (c) match, 2 run: operators       {served:10,.0f} steps/s  ({served / bare:.3f}x the bare loop)")
    print(f"  (d) mosaic match, 2 random seats  {whole:10.2f} s whole ({ns.games} games)")
    print(f"  (e) mosaic league, 4 operators    {league:10.2f} s whole (12 matches x 100 games, once)")


if __name__ == "__main__":
    main()
