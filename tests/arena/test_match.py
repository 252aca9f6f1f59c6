"""`mosaic match` through the real CLI: operators in the seats of PettingZoo games, the match folder read
back from disk, a CleanRL PPO policy trained in a seat (`mosaic/TicTacToe-vs-random-v0`) then served from
its own process as `run:ID`, Ctrl-C, and every bad input refused in one line with nothing started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("mosaic_example_plugin.operators")  # the scripted operators' entry points

MOSAIC = Path(sys.executable).parent / "mosaic"
TRAINED = "ttt-ppo"


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "CLEANRL_FASTLANE_", "MOSAIC_"))}
    return {**env, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline"}


def mosaic(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(MOSAIC), *args], cwd=cwd, env=environ(), capture_output=True, text=True, timeout=timeout)


def match(cwd: Path, env: str, *args: str, run_id: str) -> subprocess.CompletedProcess:
    return mosaic(cwd, "match", env, *args, "--run-id", run_id)


def runs_root(cwd: Path) -> Path:
    return cwd / "var" / "trainer" / "runs"


def events_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def read_match(cwd: Path, run_id: str) -> dict:
    return json.loads((runs_root(cwd) / run_id / "match.json").read_text())


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A project folder holding a CleanRL PPO run trained a few thousand steps in a Tic-Tac-Toe seat."""
    cwd = tmp_path_factory.mktemp("arena")
    proc = mosaic(
        cwd, "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "mosaic/TicTacToe-vs-random-v0",
        "--total-timesteps", "4096", "--run-id", TRAINED, "--quiet", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((runs_root(cwd) / TRAINED / "checkpoints").glob("step_4096.*"))
    return cwd


def test_random_against_random_is_recorded_and_replays_the_same(tmp_path):
    seats = ["--seat", "player_1=random", "--seat", "player_2=random", "--episodes", "12", "--seeds", "7"]
    first, second = (match(tmp_path, "tictactoe_v3", *seats, run_id=name) for name in ("m1", "m2"))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    one, two = read_match(tmp_path, "m1"), read_match(tmp_path, "m2")
    assert one["status"] == "completed" and one["first_seed"] == 7
    assert [episode["seed"] for episode in one["episodes_played"]] == list(range(7, 19))
    for seat in ("player_1", "player_2"):
        record = one["seats"][seat]
        assert record["wins"] + record["losses"] + record["draws"] == 12 == len(record["returns"])
        assert record["operator"] == "random" and record["illegal_actions"] == 0 and record["actions"] > 0
        assert record["mean_time_per_action_s"] > 0
    assert one["seats"]["player_1"]["wins"] == one["seats"]["player_2"]["losses"]  # a zero-sum game
    assert [e["returns"] for e in one["episodes_played"]] == [e["returns"] for e in two["episodes_played"]]
    assert [e["seat_seeds"] for e in one["episodes_played"]] == [e["seat_seeds"] for e in two["episodes_played"]]
    events = events_of(runs_root(tmp_path) / "m1")
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    assert [e["event"] for e in events].count("match_episode") == 12
    assert sum(e["event"] in ("run_completed", "run_failed", "run_cancelled") for e in events) == 1
    listed = json.loads(mosaic(tmp_path, "runs", "--json").stdout)
    assert {(r["run_id"], r["algo"], r["unit"], r["global_step"]) for r in listed} >= {("m1", "match", "episodes", 12)}


def test_a_parallel_env_plays_every_seat_at_once(tmp_path):
    seats = [f"--seat=agent_{i}=random" for i in range(3)]
    proc = match(tmp_path, "simple_spread_v3", *seats, "--episodes", "2", "--seeds", "5,3", run_id="spread")
    assert proc.returncode == 0, proc.stderr
    record = read_match(tmp_path, "spread")
    assert record["seeds"] == [5, 3] == [episode["seed"] for episode in record["episodes_played"]]
    for episode in record["episodes_played"]:  # the one highest return wins, a tie for it draws, the rest lose
        best = max(episode["returns"].values())
        leaders = [seat for seat, value in episode["returns"].items() if value == best]
        expected = {seat: "loss" for seat in episode["returns"]} | dict.fromkeys(
            leaders, "win" if len(leaders) == 1 else "draw"
        )
        assert episode["outcomes"] == expected
    assert all(episode["steps"] == 25 for episode in record["episodes_played"])  # MPE's max_cycles


def test_a_scripted_operator_from_an_entry_point_and_an_illegal_action_forfeits(tmp_path):
    proc = match(
        tmp_path, "tictactoe_v3", "--seat", "player_1=scripted:always-zero",
        "--seat", "player_2=scripted:mosaic_example_plugin.operators:first_legal", "--episodes", "3", run_id="forfeit",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = read_match(tmp_path, "forfeit")
    zero, first = record["seats"]["player_1"], record["seats"]["player_2"]
    assert zero["forfeits"] == zero["illegal_actions"] == zero["losses"] == 3 and first["wins"] == 3
    # always-zero's second move takes square 0 again (first-legal took square 1): illegal, the game ends there
    assert [e["forfeit"] for e in record["episodes_played"]] == [{"seat": "player_1", "action": 0}] * 3
    assert all(e["steps"] == 2 for e in record["episodes_played"])


BAD_INPUT = [
    (["nosuch_v1", "--seat", "a=random"], "unknown env 'nosuch_v1'"),
    (["tictactoe_v3", "--seat", "player_9=random", "--seat", "player_1=random"], "no seat 'player_9'"),
    (["tictactoe_v3", "--seat", "player_1=random"], "no operator for seat player_2"),
    (["tictactoe_v3", "--seat", "player_1=magic", "--seat", "player_2=random"], "unknown operator kind 'magic'"),
    (["tictactoe_v3", "--seat", "player_1=random", "--seat", "player_2=scripted:os:system"], "scripted:os:system"),
    (["tictactoe_v3", "--seat", "player_1=random", "--seat", "player_2=random", "--seeds", "x"], "--seeds"),
    (["tictactoe_v3", "--seat", "player_1=random", "--seat", "player_2=run:nosuchrun"], "no run 'nosuchrun'"),
]


@pytest.mark.parametrize(("args", "named"), BAD_INPUT)
def test_bad_input_is_one_line_and_starts_nothing(tmp_path, args, named):
    proc = mosaic(tmp_path, "match", *args)
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not runs_root(tmp_path).exists() or not any(runs_root(tmp_path).glob("match-*"))


@pytest.mark.slow
def test_a_run_of_ours_plays_its_seat_from_its_own_process(trained):
    proc = match(
        trained, "tictactoe_v3", "--seat", f"player_1=run:{TRAINED}@4096", "--seat", "player_2=random",
        "--episodes", "6", run_id="served",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    policy = read_match(trained, "served")["seats"]["player_1"]
    assert policy["operator"] == f"run:{TRAINED}@4096" and policy["actions"] >= 6
    assert policy["wins"] + policy["losses"] + policy["draws"] == 6
    assert policy["mean_time_per_action_s"] > 0
    assert not _servers_of(trained)


@pytest.mark.slow
def test_a_run_that_cannot_take_the_seat_is_refused(trained):
    root = runs_root(trained)
    bare = root / "no-checkpoint"  # a copy of the run without its checkpoints
    shutil.copytree(root / TRAINED, bare, ignore=shutil.ignore_patterns("checkpoints"))
    imported = root / "imported"
    shutil.copytree(root / TRAINED, imported)
    (imported / "UNTRUSTED.json").write_text('{"from": "elsewhere"}\n')
    for seat, named in (
        ("player_0=run:no-checkpoint", "has no checkpoint"),
        ("player_0=run:imported", "untrusted"),
        (f"player_0=run:{TRAINED}@99", "no checkpoint at step 99 (it has 4096)"),
        (f"player_0=run:{TRAINED}", "does not fit seat player_0 of connect_four_v3"),
    ):
        proc = mosaic(trained, "match", "connect_four_v3", "--seat", seat, "--seat", "player_1=random")
        assert proc.returncode == 2 and named in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not list(root.glob("match-*")) and not _servers_of(trained)


@pytest.mark.slow
def test_ctrl_c_mid_match_cancels_it_and_leaves_nothing_running(trained):
    proc = subprocess.Popen(
        [str(MOSAIC), "match", "tictactoe_v3", "--seat", f"player_1=run:{TRAINED}", "--seat", "player_2=random",
         "--episodes", "100000", "--run-id", "stopped"],
        cwd=trained, env=environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the events as they come: stop after the second episode
            if json.loads(line)["event"] == "match_episode" and json.loads(line)["payload"]["episodes_done"] >= 2:
                break
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    events = events_of(runs_root(trained) / "stopped")
    assert events[-1]["event"] == "run_cancelled"
    assert sum(e["event"] in ("run_completed", "run_failed", "run_cancelled") for e in events) == 1
    record = read_match(trained, "stopped")
    assert record["status"] == "cancelled" and len(record["episodes_played"]) >= 2
    deadline = time.monotonic() + 10
    while _servers_of(trained) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers_of(trained)


@pytest.mark.slow
def test_a_killed_match_is_listed_lost_and_its_policy_server_ends(trained):
    """SIGKILL leaves no terminal event: the heartbeat's pid tells ``mosaic runs`` the match is lost,
    and the served policy, its input gone, ends by itself."""
    proc = subprocess.Popen(
        [str(MOSAIC), "match", "tictactoe_v3", "--seat", "player_1=random", "--seat", f"player_2=run:{TRAINED}",
         "--episodes", "100000", "--run-id", "killed"],
        cwd=trained, env=environ(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line)["event"] == "match_episode":
            break
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while _servers_of(trained) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers_of(trained)
    listed = {r["run_id"]: r for r in json.loads(mosaic(trained, "runs", "--json").stdout)}
    assert listed["killed"]["status"] == "lost" and events_of(runs_root(trained) / "killed")[1]["event"] == "heartbeat"


def test_the_seated_envs_are_in_the_catalog(tmp_path):
    proc = mosaic(tmp_path, "envs", "--json")
    assert proc.returncode == 0, proc.stderr
    entries = {e["env_id"]: e for e in json.loads(proc.stdout)["envs"]}
    tictactoe = entries["mosaic/TicTacToe-vs-random-v0"]
    assert tictactoe["observation_shape"] == [27] and tictactoe["action_size"] == 9 and "ppo" in tictactoe["algorithms"]
    assert "mosaic/ConnectFour-as-player_1-vs-random-v0" in entries


def _servers_of(cwd: Path) -> list[int]:
    """Processes still serving a checkpoint of a run under ``cwd``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "cleanrl_worker.interactive" in command and str(cwd) in command:
                found.append(int(entry.name))
    return found


CORNER_PLUGIN = """
from mosaic_core import hookimpl
from mosaic_arena.operators import OperatorError, OperatorInfo


class Corner:
    def __init__(self, square):
        self.square = square
    def reset(self, seed):
        pass
    def act(self, observation, info):
        mask = list(observation["action_mask"])
        return self.square if mask[self.square] else mask.index(1)
    def close(self):
        pass


def corner(argument, seat):
    if argument not in ("", "0", "2", "6", "8"):
        raise OperatorError(f"corner:{argument}: a corner is 0, 2, 6 or 8")
    return Corner(int(argument or 0))


@hookimpl(optionalhook=True)
def mosaic_operators():
    return [OperatorInfo("corner", "scripted", "a corner first, then the first legal square", corner)]
"""
BROKEN_PLUGIN = """
from mosaic_core import hookimpl


@hookimpl(optionalhook=True)
def mosaic_operators():
    raise RuntimeError("this plugin's operators are broken")
"""
TWICE_PLUGIN = """
from mosaic_core import hookimpl
from mosaic_arena.operators import OperatorInfo


@hookimpl(optionalhook=True)
def mosaic_operators():
    return [OperatorInfo("random", "random", "another random", lambda argument, seat: None)]
"""


def test_a_plugin_registers_an_operator_kind_through_the_hook(tmp_path):
    """A third party's kind through ``mosaic_operators``, beside a plugin whose implementation raises
    (isolated: only its operators are missing); a name registered twice is refused naming both."""
    from tests.core.distributions import make_distribution

    site = tmp_path / "site"
    make_distribution(
        site, "arena-corner", {"mosaic.plugins": {"corner": "arena_corner"}}, {"arena_corner": CORNER_PLUGIN}
    )
    make_distribution(
        site, "arena-broken", {"mosaic.plugins": {"broken": "arena_broken"}}, {"arena_broken": BROKEN_PLUGIN}
    )
    seats = ["--seat", "player_1=corner:8", "--seat", "player_2=scripted:first-legal", "--episodes", "2"]
    proc = subprocess.run(
        [str(MOSAIC), "match", "tictactoe_v3", *seats, "--run-id", "corner"],
        cwd=tmp_path, env={**environ(), "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "plugin 'broken' failed in mosaic_operators" in proc.stderr  # named, and the match goes on
    record = read_match(tmp_path, "corner")
    assert record["seats"]["player_1"]["operator"] == "corner:8"
    # corner 8, then the first free squares against first-legal: 8 0 1 2 3 4 5 6, player_2's 2-4-6 diagonal
    assert [(e["steps"], e["outcomes"]["player_2"]) for e in record["episodes_played"]] == [(8, "win")] * 2
    bad = subprocess.run(
        [str(MOSAIC), "match", "tictactoe_v3", "--seat", "player_1=corner:5", "--seat", "player_2=random"],
        cwd=tmp_path, env={**environ(), "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "corner:5: a corner is 0, 2, 6 or 8" in bad.stderr, bad.stderr
    make_distribution(site, "arena-twice", {"mosaic.plugins": {"twice": "arena_twice"}}, {"arena_twice": TWICE_PLUGIN})
    twice = subprocess.run(
        [str(MOSAIC), "match", "tictactoe_v3", "--seat", "player_1=random", "--seat", "player_2=random"],
        cwd=tmp_path, env={**environ(), "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (
        twice.returncode == 2
        and "'random' is registered twice: by arena (mosaic-rl) and by twice (arena-twice)" in twice.stderr
    ), twice.stderr
