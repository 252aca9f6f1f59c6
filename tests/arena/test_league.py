"""`mosaic league` through the real CLI: a round-robin of scripted and random operators, its standings
(OpenSkill ratings with bootstrap CIs, the cross-play matrix) read back, a second run that replays no
finished match, `show`, and a bad spec refused in one line. The league of trained policies from the
three workers' runs (RLlib, CleanRL, XuanCe) beside `random` and a script is
tests/rllib/test_multiagent.py's (it has the RLlib self-play run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("openskill")
pytest.importorskip("mosaic_example_plugin.operators")

MOSAIC = Path(sys.executable).parent / "mosaic"
SPEC = """
name = "ttt"
env = "tictactoe_v3"
games = 8
first_seed = 3
[operators]
random = "random"
first-legal = "scripted:first-legal"
always-zero = "scripted:always-zero"
"""


def mosaic(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``mosaic ARGS`` in ``cwd``; ``env``: the worker environments' variables (tests/conftest.py), else none of ours."""
    base = env or {k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_")}
    env = {k: v for k, v in base.items() if not k.startswith("WANDB_")}
    return subprocess.run([str(MOSAIC), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_round_robin_rates_its_operators_and_resumes_without_replaying(tmp_path):
    (tmp_path / "ttt.toml").write_text(SPEC)
    first = mosaic(tmp_path, "league", "ttt.toml", "--json")
    assert first.returncode == 0, first.stderr
    standings = json.loads(first.stdout)
    root = tmp_path / "var" / "trainer" / "runs"
    assert json.loads((root / "league-ttt.json").read_text()) == standings
    matches = sorted(p.name for p in root.glob("league-ttt--*"))
    assert len(matches) == 6 and all(m["completed"] for m in standings["matches"])  # 3 operators, both seat orders
    for name in matches:
        record = json.loads((root / name / "match.json").read_text())
        assert record["status"] == "completed" and record["first_seed"] == 3 and len(record["episodes_played"]) == 8
    ratings = standings["ratings"]
    assert all(r["games"] == 32 and r["ci95"][0] <= r["ci95"][1] for r in ratings.values())
    # always-zero forfeits every game on its second move: rated last, its interval below the others'
    assert ratings["always-zero"]["ci95"][1] < min(ratings[n]["ci95"][0] for n in ("random", "first-legal"))
    matrix = standings["cross_play"]
    assert matrix["random"]["always-zero"] == {"score": 1.0, "ci95": [1.0, 1.0], "games": 16}
    assert matrix["random"]["random"] is None
    score = matrix["first-legal"]["random"]["score"]
    assert score + matrix["random"]["first-legal"]["score"] == pytest.approx(1.0)  # one side's score is 1 - the other's
    assert matrix["first-legal"]["random"]["ci95"][0] <= score <= matrix["first-legal"]["random"]["ci95"][1]

    events = {name: (root / name / "events.jsonl").stat().st_mtime_ns for name in matches}
    again = mosaic(tmp_path, "league", "ttt.toml", "--json")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("played already") == 6 and "completed:" not in again.stderr
    assert {name: (root / name / "events.jsonl").stat().st_mtime_ns for name in matches} == events
    assert json.loads(again.stdout) == standings  # the same games, the same seeded bootstrap

    shown = mosaic(tmp_path, "league", "show", "ttt.toml")
    assert shown.returncode == 0 and "always-zero" in shown.stdout and "cross-play" in shown.stdout


def test_a_budget_plays_where_the_score_is_least_certain_and_resumes(tmp_path):
    """always-zero forfeits every game: once it has met each operator, its scores are certain (an
    interval of width 0) and the rest of the budget goes to random against first-legal."""
    spec = SPEC.replace("games = 8", 'games = 4\nschedule = "budget"\nbudget_games = 14')
    (tmp_path / "budget.toml").write_text(spec)
    first = mosaic(tmp_path, "league", "budget.toml", "--json")
    assert first.returncode == 0, first.stderr
    standings = json.loads(first.stdout)
    played = [(m["first"], m["second"], m["games"]) for m in standings["matches"]]
    assert sum(games for *_pair, games in played) == 14 and all(m["completed"] for m in standings["matches"])
    pairings = [frozenset(pair) for *pair, _games in played]
    assert pairings.count(frozenset({"random", "always-zero"})) == 1
    assert pairings.count(frozenset({"first-legal", "always-zero"})) == 1
    assert pairings.count(frozenset({"random", "first-legal"})) == 2  # 4 + 4 + 4 + 2 games (the budget's last)
    assert {("random", "first-legal"), ("first-legal", "random")} <= {(a, b) for a, b, _games in played}
    root = tmp_path / "var" / "trainer" / "runs"
    assert all((root / m["run_id"]).name.endswith("--1") for m in standings["matches"])  # each seat order's first

    (tmp_path / "budget.toml").write_text(spec.replace("budget_games = 14", "budget_games = 22"))
    more = mosaic(tmp_path, "league", "budget.toml", "--json")
    assert more.returncode == 0, more.stderr
    assert "4 matches (14 games) played already" in more.stderr
    again = json.loads(more.stdout)
    new = [m for m in again["matches"] if m not in standings["matches"]]
    assert len(again["matches"]) == len(standings["matches"]) + len(new)  # every finished match kept as it was
    assert sum(m["games"] for m in new) == 8 and all(
        {m["first"], m["second"]} == {"random", "first-legal"} for m in new
    )
    second_meetings = [m for m in again["matches"] if m["run_id"].endswith("--2")]
    assert second_meetings, again["matches"]  # a pairing met again in the same seat order: new seeds
    for meeting in second_meetings:
        record = json.loads((root / meeting["run_id"] / "match.json").read_text())
        assert record["first_seed"] == 3 + 4
    resumed = mosaic(tmp_path, "league", "budget.toml")
    assert (
        resumed.returncode == 0 and "(22 games) played already" in resumed.stderr and "completed:" not in resumed.stderr
    )


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (SPEC.replace('"tictactoe_v3"', '"chess_v9"'), "field 'env'"),
        (SPEC.replace("games = 8", "games = 0"), "field 'games'"),
        (SPEC.replace('name = "ttt"', 'name = "../x"'), "field 'name'"),
        ('name = "x"\nenv = "tictactoe_v3"\n[operators]\nrandom = "random"\n', "field 'operators'"),
        (SPEC.replace('"scripted:always-zero"', '"magic"'), "unknown operator kind 'magic'"),
        (SPEC.replace('env = "tictactoe_v3"', 'env = "simple_spread_v3"'), "has 3 seats"),
        ("rounds = 3\n" + SPEC, "unknown field 'rounds'"),
        ('schedule = "swiss"\n' + SPEC, "field 'schedule'"),
        ("budget_games = 40\n" + SPEC, "field 'budget_games'"),
        ('schedule = "budget"\nbudget_games = 0\n' + SPEC, "field 'budget_games'"),
    ],
)
def test_a_bad_spec_is_one_line(tmp_path, spec, named):
    (tmp_path / "bad.toml").write_text(spec)
    proc = mosaic(tmp_path, "league", "bad.toml")
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2 and "Traceback" not in proc.stderr  # (+ a new-runs-root note)
    assert not list((tmp_path / "var" / "trainer" / "runs").glob("league-*")) if (tmp_path / "var").exists() else True
