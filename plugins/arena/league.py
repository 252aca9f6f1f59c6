"""``mosaic league SPEC.toml`` and ``mosaic league show SPEC.toml``: a round-robin of operators in a
two-seat game, each pairing a match in each seat order; the standings (:mod:`mosaic_arena.standings`).

The spec::

    name = "ttt"                 # the league's matches are runs league-ttt--A--B; its standings league-ttt.json
    env = "tictactoe_v3"
    games = 20                   # per match (each pairing plays two: one per seat order)
    first_seed = 0               # every match plays the same env seeds
    schedule = "round-robin"     # or "budget" with budget_games = N (below)
    [operators]                  # a name (letters, digits, - and _) for each operator spec
    random = "random"
    first-legal = "scripted:first-legal"
    ppo = "run:ttt"

A budgeted schedule (``schedule = "budget"``, ``budget_games = N``) plays matches of ``games`` games
until N games are played, each next match the pairing whose score is least certain
(:func:`_least_certain`), the k-th match of a seat order ``league-NAME--A--B--k`` with env seeds from
``first_seed + (k-1) * games`` (a pairing met again plays new games).

Resumable like an experiment: a match whose ``match.json`` says completed is never played again; one
that did not complete (cancelled, failed) is played again under the next free id (``…-2``). A budget's
schedule depends only on the completed games, so a resumed league goes on as it would have. The
standings are computed from the completed matches and written to ``<runs root>/league-NAME.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core import UsageError
from mosaic_core.toolkit import check_runs_root, default_runs_root, read_spec_text, write_json_atomic

if TYPE_CHECKING:
    from mosaic_arena.registry import SeatedOperators

__all__ = ["LEAGUE_SCHEMA", "configure", "run"]

LEAGUE_SCHEMA = "mosaic.league/1"
NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
MAX_GAMES = 10_000
SCHEDULES = ("round-robin", "budget")
FIELDS = {"name", "env", "games", "first_seed", "schedule", "budget_games", "operators"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("words", nargs="+", metavar="[show] SPEC.toml", help="play the league's matches not yet played "
                        "(then its standings), or `show SPEC.toml`: its standings only")  # fmt: skip
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument("--json", action="store_true", help="print the standings as JSON")


def run(ns: argparse.Namespace) -> int:
    show = ns.words[0] == "show"
    if len(ns.words) != 1 + show:
        raise UsageError("expected `mosaic league SPEC.toml` or `mosaic league show SPEC.toml`")
    spec = read_league(ns.words[-1])
    root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
    check_runs_root(root)
    if not show:
        code = _play(spec, root)
        if code:
            return code
    standings = _standings(spec, root)
    if not show:
        write_json_atomic(root / f"league-{spec['name']}.json", standings)
    _print(standings, ns.json)
    return 0


def read_league(path: str) -> dict[str, Any]:
    """The spec at ``path``, checked: one UsageError naming the field and the file."""
    from mosaic_arena.games import GAMES

    text = read_spec_text(path, "league spec")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"league spec {path}: {exc}") from None

    def bad(field: str, expected: str) -> UsageError:
        return UsageError(f"league spec {path}: field {field!r}: expected {expected}, got {data.get(field)!r}")

    if not isinstance(data.get("name"), str) or not NAME.fullmatch(data["name"]):
        raise bad("name", "a name of letters, digits, - and _")
    if data.get("env") not in GAMES:
        raise bad("env", f"one of {', '.join(GAMES)}")
    games, seed = data.get("games", 10), data.get("first_seed", 0)
    if isinstance(games, bool) or not isinstance(games, int) or not 1 <= games <= MAX_GAMES:
        raise bad("games", f"a number of games from 1 to {MAX_GAMES:,}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise bad("first_seed", "a seed from 0 to 2**31-1")
    operators = data.get("operators")
    if not isinstance(operators, dict) or len(operators) < 2:
        raise bad("operators", "a table of at least two operators, name = spec")
    for name, operator in operators.items():
        if not NAME.fullmatch(name) or not isinstance(operator, str):
            raise UsageError(
                f'league spec {path}: operators.{name}: expected name = "SPEC" (a name of letters, digits, - and _)'
            )
    unknown = set(data) - FIELDS
    if unknown:
        raise UsageError(f"league spec {path}: unknown field {sorted(unknown)[0]!r}")
    schedule, budget = data.get("schedule", "round-robin"), data.get("budget_games")
    if schedule not in SCHEDULES:
        raise bad("schedule", " or ".join(f'"{name}"' for name in SCHEDULES))
    if (schedule == "budget") != (budget is not None):
        raise bad("budget_games", 'a number of games with schedule = "budget" (and only then)')
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_GAMES):
        raise bad("budget_games", f"a number of games from 1 to {MAX_GAMES:,}")
    spec = {"name": data["name"], "env": data["env"], "games": games, "first_seed": seed, "schedule": schedule}
    return {**spec, **({"budget_games": budget} if budget else {}), "operators": operators}


def _schedule(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Every ordered pair of operators: (the first seat's, the second's)."""
    names = list(spec["operators"])
    return [(first, second) for first in names for second in names if first != second]


def _base(spec: dict[str, Any], first: str, second: str, k: int = 1) -> str:
    """The id of the ``k``-th match of ``first`` against ``second`` (a round-robin plays one)."""
    base = f"league-{spec['name']}--{first}--{second}"
    return f"{base}--{k}" if spec["schedule"] == "budget" else base


def _completed(root: Path, base: str) -> tuple[Path | None, str]:
    """The completed match of ``base`` (or ``base-2``…), else None and the next free id."""
    for attempt in range(1, 1000):
        run_id = base if attempt == 1 else f"{base}-{attempt}"
        folder = root / run_id
        if not folder.exists():
            return None, run_id
        if _status(folder) == "completed":
            return folder, run_id
    raise UsageError(f"league match {base}: a thousand attempts, none completed")


def _status(folder: Path) -> str | None:
    try:
        return json.loads((folder / "match.json").read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        return None


def _play(spec: dict[str, Any], root: Path) -> int:
    """The matches not yet played; a served policy's process (``run:``) is kept across them, one per
    seat it takes, and stopped when the league ends however it ends."""
    from mosaic_arena.registry import SeatedOperators

    built = SeatedOperators(keep=True)
    try:
        seats = _check_operators(spec, root, built)
        if spec["schedule"] == "budget":
            return _play_budget(spec, root, seats, built)
        return _play_round_robin(spec, root, seats, built)
    finally:
        if built.kept:
            print(f"mosaic: league {spec['name']}: {len(built.kept)} policy servers (one per run: operator and seat) "
                  "served its matches", file=sys.stderr)  # fmt: skip
        built.close()


def _play_round_robin(spec: dict[str, Any], root: Path, seats: list[str], built: SeatedOperators) -> int:
    pairs = _schedule(spec)
    for k, (first, second) in enumerate(pairs, 1):
        done, run_id = _completed(root, _base(spec, first, second))
        if done is not None:
            print(f"mosaic: league {spec['name']}: {run_id} played already ({k}/{len(pairs)})", file=sys.stderr)
            continue
        code = _play_match(spec, root, seats, (first, second), run_id, spec["games"], spec["first_seed"], built)
        if code:
            return code
    return 0


def _play_budget(spec: dict[str, Any], root: Path, seats: list[str], built: SeatedOperators) -> int:
    """Matches of the least certain pairing (:func:`_least_certain`) until ``budget_games`` games are played."""
    played = [match for match in _played(spec, root) if match.games is not None]
    if played:
        count = sum(len(match.games or ()) for match in played)
        print(f"mosaic: league {spec['name']}: {len(played)} matches ({count} games) played already", file=sys.stderr)
    while (left := spec["budget_games"] - sum(len(match.games or ()) for match in played)) > 0:
        first, second = _least_certain(spec, [game for match in played for game in match.games or ()])
        k = 1 + sum((match.first, match.second) == (first, second) for match in played)
        _done, run_id = _completed(root, _base(spec, first, second, k))
        seed = spec["first_seed"] + (k - 1) * spec["games"]  # a pairing met again plays new games
        code = _play_match(spec, root, seats, (first, second), run_id, min(spec["games"], left), seed, built)
        if code:
            return code
        before, played = len(played), [match for match in _played(spec, root) if match.games is not None]
        if len(played) == before:
            raise UsageError(f"league match {run_id} ended without completing")
    return 0


def _least_certain(spec: dict[str, Any], games: list[Any]) -> tuple[str, str]:
    """The next match of a budget: the pairing whose score is least certain (one that never met, else the
    widest bootstrap interval of its cross-play score; ties: fewer games, then the spec's order), in the
    seat order it has played less (the spec's first when even). Deterministic: a resumed league goes on
    as it would have."""
    import itertools
    import math

    from mosaic_arena.standings import cross_play

    names = list(spec["operators"])
    matrix = cross_play(names, games)

    def doubt(pair: tuple[str, str]) -> tuple[float, int]:
        cell = matrix[pair[0]][pair[1]]
        return (-math.inf, 0) if cell is None else (cell["ci95"][0] - cell["ci95"][1], cell["games"])

    one, other = min(itertools.combinations(names, 2), key=doubt)
    in_order = sum((game.first, game.second) == (one, other) for game in games)
    reverse = sum((game.first, game.second) == (other, one) for game in games)
    return (one, other) if in_order <= reverse else (other, one)


def _play_match(
    spec: dict[str, Any],
    root: Path,
    seats: list[str],
    pair: tuple[str, str],
    run_id: str,
    games: int,
    seed: int,
    built: SeatedOperators,
) -> int:
    """``mosaic match`` of the pair's operators in the game's two seats, quiet; its exit code."""
    from mosaic_arena.match import run as play_match

    specs = [f"{seat}={spec['operators'][name]}" for seat, name in zip(seats, pair, strict=True)]
    ns = argparse.Namespace(env=spec["env"], seat=specs, episodes=games, seeds=str(seed), run_id=run_id,
                            runs_dir=str(root), quiet=True)  # fmt: skip
    return play_match(ns, built)


@dataclass(frozen=True)
class Played:
    """A match of the league: its operators in seat order, its id, its games (None: not completed)."""

    first: str
    second: str
    run_id: str
    games: list[Any] | None


def _played(spec: dict[str, Any], root: Path) -> list[Played]:
    """A round-robin's matches, each pairing's (completed or not); a budget's completed ones."""
    found = []
    for first, second in _schedule(spec):
        for k in range(1, MAX_GAMES + 1):
            folder, run_id = _completed(root, _base(spec, first, second, k))
            if folder is None and spec["schedule"] == "budget":
                break
            found.append(Played(first, second, run_id, None if folder is None else _games(folder, first, second)))
            if spec["schedule"] != "budget":
                break
    return found


def _games(folder: Path, first: str, second: str) -> list[Any]:
    from mosaic_arena.standings import Game

    record = json.loads((folder / "match.json").read_text(encoding="utf-8"))
    seat = next(iter(record["seats"]))  # the first seat's outcomes: `first`'s
    return [Game(first, second, outcome) for outcome in record["seats"][seat]["outcomes"]]


def _check_operators(spec: dict[str, Any], root: Path, built: SeatedOperators) -> list[str]:
    """The game's two seats, each operator built once for the first: nothing of the league plays
    before all of them fit (a ``run:`` operator's server, started here, is kept for the first seat)."""
    import dataclasses

    from mosaic_arena.games import find_game, seats_of
    from mosaic_arena.operators import OperatorError

    try:
        seats = seats_of(find_game(spec["env"]))
        if len(seats) != 2:
            raise OperatorError(f"league: {spec['env']} has {len(seats)} seats; a league pairs two operators")
        first = dataclasses.replace(next(iter(seats.values())), runs_root=root)
        for name, operator in spec["operators"].items():
            try:
                built.release(built.build(operator, first))
            except OperatorError as exc:
                raise OperatorError(f"league spec, operators.{name}: {exc}") from None
    except OperatorError as exc:
        raise UsageError(str(exc)) from None
    return list(seats)


def _standings(spec: dict[str, Any], root: Path) -> dict[str, Any]:
    from mosaic_arena.standings import cross_play, ratings

    played = _played(spec, root)
    games = [game for match in played for game in match.games or ()]
    matches = [
        {"first": m.first, "second": m.second, "run_id": m.run_id, "completed": m.games is not None,
         "games": len(m.games or ())}
        for m in played
    ]  # fmt: skip
    names = list(spec["operators"])
    return {
        "schema": LEAGUE_SCHEMA,
        **spec,
        "matches": matches,
        "rating": "openskill PlackettLuce mu; ci95: bootstrap over the games (2.5th, 97.5th percentiles)",
        "ratings": ratings(names, games),
        "cross_play": cross_play(names, games),
    }


def _print(standings: dict[str, Any], as_json: bool) -> None:
    from mosaic_core.toolkit import print_table

    if as_json:
        print(json.dumps(standings, indent=2))
        return
    ranked = sorted(standings["ratings"].items(), key=lambda item: -item[1]["mu"])
    rows = [(name, f"{r['mu']:.2f}", _ci(r["ci95"]), str(r["games"])) for name, r in ranked]
    matches = standings["matches"]
    played = f"{sum(m['completed'] for m in matches)} of {len(matches)} matches played"
    if standings["schedule"] == "budget":
        played = (
            f"{len(matches)} matches, {sum(m['games'] for m in matches)} of {standings['budget_games']} games played"
        )
    print_table(f"league {standings['name']} ({standings['env']}): ratings", ("operator", "mu", "95% CI", "games"), rows,
                [f"{played}; OpenSkill (Plackett-Luce), bootstrap CIs"])  # fmt: skip
    names = [name for name, _ in ranked]
    matrix = standings["cross_play"]
    cells = [(row, *(_cell(matrix[row][column]) for column in names)) for row in names]
    print_table("cross-play: the row's score against the column (a draw is half)", ("", *names), cells)


def _ci(interval: list[float] | None) -> str:
    return f"[{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "-"


def _cell(entry: dict[str, Any] | None) -> str:
    return f"{entry['score']:.2f} {_ci(entry['ci95'])}" if entry else "-"
