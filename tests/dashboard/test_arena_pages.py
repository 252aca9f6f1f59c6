"""The arena in a real headless Chromium, against a real ``mosaic serve`` and real ``mosaic match`` /
``mosaic league`` processes: a person plays a whole game of Tic-Tac-Toe against a CleanRL PPO policy
trained in a seat, a page closed mid-game forfeits it, a running match shows its board live, and the
Leagues page shows the numbers ``mosaic league show --json`` prints."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import child_env, http, post_json, wait_for

pytest.importorskip("pettingzoo")
pytestmark = pytest.mark.slow

MOSAIC = Path(sys.executable).parent / "mosaic"
SAID = {"win": "won", "loss": "lost", "draw": "drew"}


def mosaic(workdir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    command = [str(MOSAIC), *args]
    return subprocess.run(command, cwd=workdir, env=child_env(workdir), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def started():
    """The matches a test starts: one still running at its end (a failed test) is stopped, by its pid."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_match(started: list, workdir: Path, run_id: str, *seats: str, episodes: int = 1) -> subprocess.Popen:
    args = ["match", "tictactoe_v3", *(f"--seat={seat}" for seat in seats), "--episodes", str(episodes)]
    args += ["--run-id", run_id, "--quiet", "--human-timeout", "120", "--runs-dir", "var/trainer/runs"]
    proc = subprocess.Popen(
        [str(MOSAIC), *args], cwd=workdir, env=child_env(workdir), stderr=subprocess.PIPE, text=True
    )
    started.append(proc)
    wait_for(lambda: (workdir / f"var/trainer/runs/{run_id}/config.json").exists() or proc.poll() is not None, 60,
             "the match folder")  # fmt: skip
    return proc


def ended(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str]:
    _out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def match_record(workdir: Path, run_id: str) -> dict:
    return json.loads((workdir / f"var/trainer/runs/{run_id}/match.json").read_text())


def open_turn(page, after: int) -> int | None:
    """The next open turn's number (after ``after``), or None when the game is over (its outcome shown)."""
    seat = ".human-seat[data-seat='player_1']"
    page.wait_for_function(
        f"""() => {{ const s = document.querySelector("{seat}");
                     return s && (s.dataset.outcomes !== "" || +s.dataset.turn > {after}); }}""",
        timeout=90000,
    )
    if page.get_attribute(seat, "data-outcomes"):
        return None
    return int(page.get_attribute(seat, "data-turn"))


def test_a_person_plays_tic_tac_toe_against_a_trained_policy(serve, browser, artifacts, workdir, started):
    trained = mosaic(workdir, "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "mosaic/TicTacToe-vs-random-v0",
                     "--total-timesteps", "2048", "--run-id", "ttt-ppo", "--quiet")  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    base, server = serve()
    proc = start_match(started, workdir, "person", "player_1=human", "player_2=run:ttt-ppo")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.ready["url"] + "#/run/person")
    page.wait_for_selector("#human-panel:not([hidden]) .human-seat")
    page.wait_for_function("() => document.querySelector('#frame').naturalWidth > 0", timeout=30000)  # the board

    turn, played = open_turn(page, 0), []
    while turn is not None:
        buttons = page.locator(".human-seat[data-seat='player_1'] .human-buttons button:not([disabled])")
        if played:  # the cell played before is refused: by its key here, and by the server
            taken = page.locator(f".human-buttons button[data-action='{played[0]}']")
            assert taken.is_disabled()
            page.keyboard.press(taken.text_content())
            page.wait_for_selector("#human-note:has-text('is not a legal move now')")
            status, body = post_json(
                f"{base}/api/runs/person/human", {"seat": "player_1", "turn": turn, "action": played[0]}
            )
            assert status == 409 and "is not legal now" in body["error"]
        action = int(buttons.first.get_attribute("data-action"))
        page.screenshot(path=str(artifacts / f"turn-{turn}.png"), full_page=True)
        if len(played) == 1:
            page.keyboard.press(buttons.first.text_content())  # a move by its key 1-9
        else:
            buttons.first.click()
        played.append(action)
        turn = open_turn(page, turn)

    shown = page.text_content(".human-outcomes li")
    page.screenshot(path=str(artifacts / "game-over.png"), full_page=True)
    code, err = ended(proc)
    assert code == 0, err
    record = match_record(workdir, "person")
    outcome = record["seats"]["player_1"]["outcomes"][0]
    assert shown == f"game 1: player_1 {SAID[outcome]}"
    assert record["status"] == "completed" and record["seats"]["player_2"]["operator"] == "run:ttt-ppo"
    assert record["seats"]["player_1"]["actions"] == len(played) and record["seats"]["player_1"]["illegal_actions"] == 0
    status, _body = post_json(f"{base}/api/runs/person/human", {"seat": "player_1", "turn": turn or 1, "action": 0})
    assert status == 409  # the match is over: nothing is open
    assert errors == []
    print(f"screenshots: {artifacts}")


def test_a_page_closed_mid_game_forfeits_it_and_the_match_ends_cancelled(serve, browser, workdir, started):
    base, server = serve()
    proc = start_match(started, workdir, "left", "player_1=human", "player_2=random", episodes=3)
    page = browser.new_page()
    page.goto(server.ready["url"] + "#/run/left")
    page.wait_for_selector(".human-seat[data-seat='player_1'] .human-buttons button:not([disabled])")
    url = f"{base}/api/runs/left/human"  # answers that are not a move of the open turn: refused, the turn stays open
    assert post_json(url, {"seat": "player_2", "turn": 1, "action": 0})[1]["error"].endswith("is not played by a human")
    assert post_json(url, {"seat": "player_1", "turn": 2, "action": 0})[1]["error"].startswith(
        "turn 2 of player_1 is not open"
    )
    assert post_json(url, {"seat": "player_1"}) == (409, {"error": 'expected {"seat": NAME, "turn": N, "action": A} '
                                                          'or {"seat": NAME, "turn": N, "leave": true}'})  # fmt: skip
    status, _headers, _body = http(url, method="POST", body=b"[1", headers={"X-Mosaic-Dashboard": "1"})
    assert status == 400
    assert page.locator(".human-seat[data-seat='player_1'][data-turn='1']").count() == 1
    page.close(run_before_unload=True)
    code, err = ended(proc)
    last = [line for line in err.splitlines() if not line.startswith("mosaic: note:")]
    assert code == 130 and len(last) == 1 and "cancelled (player_1 (human) left the page)" in last[0], err
    record = match_record(workdir, "left")
    assert record["status"] == "cancelled" and record["reason"] == "player_1 (human) left the page"
    (game,) = record["episodes_played"]  # the game in progress, forfeit; no other played
    assert game["forfeit"]["seat"] == "player_1" and game["outcomes"] == {"player_1": "loss", "player_2": "win"}
    assert not list((workdir / "var/trainer/runs/left/human").glob("*.turn.json"))  # nobody is asked any more


def test_a_running_match_is_listed_and_shows_its_board_live(serve, browser, artifacts, workdir, started):
    base, server = serve()
    proc = start_match(started, workdir, "live", "player_1=random", "player_2=scripted:first-legal", episodes=100000)
    page = browser.new_page()
    page.goto(server.ready["url"])
    row = '#runs tr[data-run-id="live"][data-status="running"]'
    page.wait_for_selector(row, timeout=30000)
    assert page.text_content(f"{row} td:nth-child(5)") == "match"
    page.click(f"{row} a")
    page.wait_for_function("() => document.querySelector('#frame').naturalWidth > 0", timeout=30000)
    first = int(page.get_attribute("#frame-metrics", "data-frame-number") or 0)
    board = page.locator("#frame").screenshot()
    wait_for(lambda: int(page.get_attribute("#frame-metrics", "data-frame-number") or 0) > first + 2, 30, "new boards")
    wait_for(lambda: page.locator("#frame").screenshot() != board, 30, "the shown board to change")
    assert page.is_hidden("#human-panel")  # nobody human in this match
    page.screenshot(path=str(artifacts / "live-match.png"), full_page=True)
    proc.send_signal(signal.SIGINT)
    code, _err = ended(proc)
    assert code == 130 and match_record(workdir, "live")["status"] == "cancelled"
    page.wait_for_selector("#events li.run_cancelled", timeout=30000)


def test_the_league_page_shows_what_mosaic_league_show_prints(serve, browser, artifacts, workdir):
    spec = workdir / "duel.toml"
    spec.write_text('name = "duel"\nenv = "tictactoe_v3"\ngames = 6\n[operators]\n'
                    'random = "random"\nfirst-legal = "scripted:first-legal"\nalways-zero = "scripted:always-zero"\n')  # fmt: skip
    played = mosaic(workdir, "league", str(spec))
    assert played.returncode == 0, played.stderr[-2000:]
    shown = mosaic(workdir, "league", "show", str(spec), "--json")
    standings = json.loads(shown.stdout)
    _base, server = serve()
    page = browser.new_page()
    page.goto(server.ready["url"] + "#/leagues")
    league = page.locator(".league[data-league='duel']")
    league.wait_for()
    names = list(standings["ratings"])
    for name in names:
        rating, row = standings["ratings"][name], league.locator(f"tr[data-operator='{name}']")
        assert float(row.locator(".mu").text_content()) == pytest.approx(rating["mu"], abs=5e-4)
        low, high = (float(x) for x in row.locator(".ci").text_content().strip("[]").split(", "))
        assert (low, high) == pytest.approx(tuple(rating["ci95"]), abs=5e-4)
        assert int(row.locator(".games").text_content()) == rating["games"]
        for column in names:
            text, cell = (
                league.locator(f"td[data-row='{name}'][data-column='{column}']").text_content(),
                (standings["cross_play"][name][column]),
            )
            if cell is None:
                assert text == "–"
                continue
            score, interval, games = text.split(" ", 1)[0], text.split("[", 1)[1].split("]")[0], text.rsplit("(", 1)[1]
            assert float(score) == pytest.approx(cell["score"], abs=5e-4)
            assert tuple(float(x) for x in interval.split(", ")) == pytest.approx(tuple(cell["ci95"]), abs=5e-4)
            assert int(games.rstrip(")")) == cell["games"]
    page.screenshot(path=str(artifacts / "leagues.png"), full_page=True)

    # A league file's names are text on the page, never markup.
    evil, named = dict(standings, name="evil"), "<img src=x id=injected>"
    evil["ratings"] = {named: standings["ratings"]["random"]}
    evil["operators"], evil["cross_play"] = {named: "<b>random</b>"}, {named: {named: None}}
    (workdir / "var/trainer/runs/league-evil.json").write_text(json.dumps(evil))
    page.reload()
    page.locator(".league[data-league='evil']").wait_for()
    assert page.locator("#injected").count() == 0 and named in page.text_content(".league[data-league='evil']")
