"""``mosaic match ENV --seat NAME=OPERATOR … --episodes N --seeds S``: operators play a PettingZoo game
in lock-step, recorded like a run.

Everything given is checked before anything starts (the env, every seat named once and filled,
each operator built for its seat); then the match folder ``<runs root>/<match id>/`` gets
``config.json`` (``kind: "match"``), ``events.jsonl`` (``run_started``, a ``match_episode`` per
episode, one terminal event) and ``match.json`` (rewritten at most once a second while it plays,
and at its end). ``mosaic runs`` lists it as a run of algorithm ``match`` whose progress counts
episodes. Ctrl-C or SIGTERM ends it
``run_cancelled`` (exit 130), every operator closed, its processes with it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core import EventEmitter, RunDirectory, UsageError
from mosaic_core.toolkit import check_run_id, check_runs_root, default_runs_root, new_run_id, write_json_atomic

if TYPE_CHECKING:
    from mosaic_arena.registry import SeatedOperators

__all__ = ["MATCH_FILE", "MatchRecorder", "configure", "run"]

MATCH_FILE = "match.json"
MATCH_SCHEMA = "mosaic.match/1"
EPISODE_EVENT = "match_episode"
MAX_EPISODES = 100_000  # match.json keeps every episode
HEARTBEAT_S = 30.0  # as a run's: its pid, so `mosaic runs` tells a killed match (lost) from a playing one
HUMAN_TIMEOUT_S = 300.0  # a person's time per move (--human-timeout)
WRITE_EVERY_S = 1.0  # match.json while the match plays (rewriting it after every game of thousands costs n²)


def configure(parser: argparse.ArgumentParser) -> None:
    from mosaic_arena.games import GAMES

    parser.add_argument("env", metavar="ENV", help=f"a PettingZoo env: {', '.join(GAMES)}")
    parser.add_argument(
        "--seat",
        action="append",
        default=[],
        metavar="NAME=OPERATOR",
        help="who plays seat NAME (every seat once): random, scripted:NAME (a mosaic.operators entry point), "
        "run:RUN_ID[@STEP] (a run's policy, served from its own process)",
    )
    parser.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    parser.add_argument(
        "--seeds",
        default="0",
        metavar="S|S1,S2,…",
        help="the first episode's env seed (episode k plays S+k), or one seed per episode (default 0)",
    )
    parser.add_argument(
        "--human-timeout",
        type=float,
        default=HUMAN_TIMEOUT_S,
        metavar="SECONDS",
        help="a human seat's time for each move on the dashboard's page; past it the game is forfeit and the "
        "match ends cancelled (default 300)",
    )
    parser.add_argument("--run-id", help="the match's id (default: match-<ULID>)")
    parser.add_argument("--quiet", action="store_true", help="the events to events.jsonl only, not to stdout")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")


def episode_seeds(text: str, episodes: int) -> list[int]:
    """The env seed of each episode (``--seeds``), or :class:`UsageError`."""
    try:
        given = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--seeds {text!r}: expected a seed or a comma-separated list of seeds") from None
    if any(seed < 0 or seed >= 2**31 for seed in given):
        raise UsageError(f"--seeds {text!r}: seeds are integers from 0 to 2**31-1")
    if len(given) == 1:
        return [given[0] + k for k in range(episodes)]
    if len(given) != episodes:
        raise UsageError(f"--seeds lists {len(given)} seeds for --episodes {episodes}: give one per episode")
    return given


def seeds_record(seeds: list[int]) -> dict[str, Any]:
    """The seeds as ``config.json`` and ``match.json`` keep them: ``first_seed`` when they count up from
    it (one number for any number of episodes; each episode's record has its own), else the list."""
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return {"first_seed": seeds[0]}
    return {"seeds": seeds}


def run(ns: argparse.Namespace, built: SeatedOperators | None = None) -> int:
    """The match ``ns`` asks for; ``built``: a league's operators, kept across its matches."""
    from mosaic_arena.operators import OperatorError
    from mosaic_arena.registry import SeatedOperators

    built = built or SeatedOperators()

    if not 1 <= ns.episodes <= MAX_EPISODES:
        raise UsageError(f"--episodes must be from 1 to {MAX_EPISODES:,}, got {ns.episodes}")
    seeds = episode_seeds(ns.seeds, ns.episodes)
    human_timeout = getattr(ns, "human_timeout", HUMAN_TIMEOUT_S)  # a league's matches seat no person
    if not 0 < human_timeout <= 86_400:
        raise UsageError(f"--human-timeout must be from 0 to 86400 seconds, got {human_timeout:g}")
    root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
    check_runs_root(root)
    run_id = ns.run_id or f"match-{new_run_id()}"
    check_run_id(run_id)
    folder = RunDirectory.for_run(root, run_id)
    folder.check_usable()
    try:
        where = {"runs_root": root, "match_dir": folder.path, "human_timeout_s": human_timeout}
        game, seats, specs, operators = _seat_everyone(ns.env, ns.seat, where, built)
    except OperatorError as exc:
        raise UsageError(str(exc)) from None
    try:
        return _record(MatchRecorder(folder, game.name, specs, seeds, quiet=ns.quiet), game, seats, operators)
    finally:
        for operator in operators.values():
            built.release(operator)


def _seat_everyone(
    env: str, given: list[str], where: dict[str, Any], built: SeatedOperators
) -> tuple[Any, dict[str, Any], dict[str, str], dict[str, Any]]:
    """The game, its seats (with ``where``: the runs root, the match's folder, a person's time per
    move), each seat's spec and its operator; :class:`OperatorError` for anything that does not fit
    (the operators built so far closed)."""
    import dataclasses

    from mosaic_arena.games import find_game, seats_of
    from mosaic_arena.operators import OperatorError
    from mosaic_arena.registry import parse_seat

    game = find_game(env)
    seats = {name: dataclasses.replace(seat, **where) for name, seat in seats_of(game).items()}
    specs: dict[str, str] = {}
    for text in given:
        name, spec = parse_seat(text)
        if name not in seats:
            raise OperatorError(f"--seat {text}: {env} has no seat {name!r} (its seats: {', '.join(seats)})")
        if name in specs:
            raise OperatorError(f"--seat {text}: seat {name} is given twice")
        specs[name] = spec
    missing = [name for name in seats if name not in specs]
    if missing:
        raise OperatorError(f"no operator for seat {', '.join(missing)} of {env}: add --seat {missing[0]}=random")
    operators: dict[str, Any] = {}
    try:
        for name, spec in specs.items():
            operators[name] = built.build(spec, seats[name])
    except BaseException:
        for operator in operators.values():
            built.release(operator)
        raise
    return game, seats, specs, operators


def _record(recorder: MatchRecorder, game: Any, seats: dict[str, Any], operators: dict[str, Any]) -> int:
    """Play the match into the recorder's folder; the exit code (0, 130 cancelled, 1 failed)."""
    from mosaic_arena.live import FramePublisher
    from mosaic_arena.play import play_episode

    recorder.start()
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    status, code, payload = "completed", 0, {}
    env = frames = None
    boards = {name for name, operator in operators.items() if getattr(operator, "shows_board", False)}
    try:
        env = game.make(render_mode="rgb_array")
        frames = FramePublisher(recorder.folder.path, env)
        on_turn = _frame_offers(frames, boards)
        for seed in recorder.seeds:
            episode = play_episode(game, env, seats, operators, recorder.tallies, seed, on_turn)
            recorder.add(episode)
            left = (episode.get("forfeit") or {}).get("left")
            if left:  # a person left: the game is forfeit, the match ends here
                status, code, payload = "cancelled", 130, {"reason": left}
                break
    except KeyboardInterrupt:
        status, code, payload = "cancelled", 130, {"reason": "interrupted (Ctrl-C or SIGTERM)"}
    except Exception as exc:  # an operator or the env failed: recorded, one line
        status, code, payload = "failed", 1, {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if frames is not None:
            frames.end()
        if env is not None:
            env.close()
    recorder.end(status, payload)
    return code


def _frame_offers(frames: Any, boards: set[str]) -> Any:
    """The match's ``on_turn``: a frame when one is due, at once before a seat that shows its player
    the board (a human's) and when a game with such a seat ends."""

    def offer(agent: str | None) -> None:
        frames.offer(urgent=agent in boards if agent is not None else bool(boards))

    return offer


class MatchRecorder:
    """The match folder's files: ``config.json``, ``events.jsonl`` (an event per episode), ``match.json``."""

    def __init__(self, folder: RunDirectory, env_id: str, specs: dict[str, str], seeds: list[int], quiet: bool):
        from mosaic_arena.play import SeatTally

        self.folder, self.seeds, self.quiet = folder, seeds, quiet
        self.config = {"run_id": folder.path.name, "kind": "match", "algo": "match", "env_id": env_id}
        self.config.update(seats=specs, episodes=len(seeds), **seeds_record(seeds))
        self.tallies = {name: SeatTally(spec) for name, spec in specs.items()}
        self.played: list[dict[str, Any]] = []
        self.events: EventEmitter | None = None
        self.written_at = self.beat_at = self.started_at = time.monotonic()

    def start(self) -> None:
        self.folder.create()
        write_json_atomic(self.folder.config, self.config)
        self.events = EventEmitter(self.folder.path.name, self.folder.events, to_stream=not self.quiet)
        progress = {"unit": "episodes", "total": len(self.seeds), "event": EPISODE_EVENT}
        self.events.emit("run_started", {**self.config, "progress": progress})
        self._heartbeat()
        self._write("running")

    def add(self, episode: dict[str, Any]) -> None:
        """One episode more: a ``match_episode`` event (with the first seat's mean return so far, what
        ``mosaic runs`` shows), ``match.json`` when a second has passed since it was last written."""
        self.played.append(episode)
        if time.monotonic() - self.written_at >= WRITE_EVERY_S:
            self._write("running")
        if time.monotonic() - self.beat_at >= HEARTBEAT_S:
            self._heartbeat()
        first = next(iter(self.tallies.values())).returns
        done = {"episodes_done": len(self.played), "episodes_total": len(self.seeds)}
        assert self.events is not None
        self.events.emit(EPISODE_EVENT, {**done, "mean_return": sum(first) / len(first), **episode})

    def end(self, status: str, payload: dict[str, Any]) -> None:
        assert self.events is not None, "end() before start()"
        why = payload.get("reason") or payload.get("error")
        self._write(status, why)
        self.events.emit(f"run_{status}", {**payload, "match": str(self.folder.path / MATCH_FILE)})
        self.events.close()
        _summary(self.folder, self.tallies, status + (f" ({why})" if why else ""))

    def _heartbeat(self) -> None:
        assert self.events is not None
        self.beat_at = time.monotonic()
        self.events.emit("heartbeat", {"elapsed_s": round(self.beat_at - self.started_at, 3), "pid": os.getpid()})

    def _write(self, status: str, why: str | None = None) -> None:
        seats = {name: tally.to_dict() for name, tally in self.tallies.items()}
        record = {"schema": MATCH_SCHEMA, **self.config, "status": status, "episodes_played": self.played}
        if why:
            record["reason"] = why
        write_json_atomic(self.folder.path / MATCH_FILE, {**record, "seats": seats})
        self.written_at = time.monotonic()


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _summary(folder: RunDirectory, tallies: dict[str, Any], status: str) -> None:
    parts = [
        f"{name} ({t.operator}) {t.outcomes.count('win')}W {t.outcomes.count('loss')}L {t.outcomes.count('draw')}D"
        for name, t in tallies.items()
    ]
    print(
        f"mosaic: match {folder.path.name} {status}: " + "; ".join(parts) + f"; {folder.path / MATCH_FILE}",
        file=sys.stderr,
    )
