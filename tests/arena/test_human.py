"""A `human` seat without a page, through the real `mosaic match`: no move within --human-timeout forfeits
the game and ends the match cancelled (one line, nothing left asked); a human seat given wrongly is refused
in one line, exit 2, no match folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")

MOSAIC = Path(sys.executable).parent / "mosaic"


def match(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    (cwd / "runs").mkdir(mode=0o700, exist_ok=True)  # (a new runs root is a note on stderr)
    command = [str(MOSAIC), "match", "tictactoe_v3", *args, "--runs-dir", str(cwd / "runs"), "--quiet"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_no_move_in_time_forfeits_the_game_and_cancels_the_match(tmp_path):
    done = match(tmp_path, "--seat", "player_1=random", "--seat", "player_2=human", "--episodes", "3",
                 "--human-timeout", "1.5", "--run-id", "nobody")  # fmt: skip
    assert done.returncode == 130 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "cancelled (player_2 (human) did not move within 1.5 s)" in done.stderr
    record = json.loads((tmp_path / "runs/nobody/match.json").read_text())
    assert record["status"] == "cancelled" and record["reason"] == "player_2 (human) did not move within 1.5 s"
    (game,) = record["episodes_played"]
    assert game["forfeit"] == {"seat": "player_2", "action": None, "left": record["reason"]}
    assert game["outcomes"] == {"player_1": "win", "player_2": "loss"} and game["steps"] == 1
    assert record["seats"]["player_2"]["forfeits"] == 1 and record["seats"]["player_2"]["illegal_actions"] == 0
    assert list((tmp_path / "runs/nobody/human").iterdir()) == []  # its turn withdrawn: nobody is asked
    events = [json.loads(line)["event"] for line in (tmp_path / "runs/nobody/events.jsonl").read_text().splitlines()]
    assert events[-1] == "run_cancelled" and events.count("match_episode") == 1
    assert (tmp_path / "runs/nobody/frames/latest.npz").exists()  # the board the person was shown


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--seat", "player_1=human:60", "--seat", "player_2=random"], "human takes no argument"),
        (["--seat", "player_1=human", "--seat", "player_2=random", "--human-timeout", "0"], "--human-timeout"),
    ],
)
def test_a_human_seat_given_wrongly_is_one_line_and_starts_nothing(tmp_path, args, named):
    done = match(tmp_path, *args, "--run-id", "wrong")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert not (tmp_path / "runs/wrong").exists()
