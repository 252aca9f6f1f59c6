"""XuanCe on an arena board game through `mosaic run`: IPPO trains on Tic-Tac-Toe with both seats
learning (the worker's own config, the waiting seat's move masked to a no-op), per-agent metrics and a
checkpoint and the board in FastLane; `mosaic algos` lists the game; the run then takes either seat of `mosaic match` against
`random` as a `run:` operator served from the XuanCe environment; a seat it has no policy for is
refused in one line, and so is a checkpoint whose meta.json names a config key the run could not have
had; the server answers a malformed request with an error and goes on. One training run for the module
(a few seconds)."""

import json
import shutil
import subprocess

import pytest
from conftest import MOSAIC, events_of, run_args

from tests.conftest import worker_bin

pytest.importorskip("pettingzoo")

TTT = "classic/tictactoe_v3"
SEATS = {"player_1", "player_2"}
STEPS = 3000


@pytest.fixture(scope="module")
def trained(xuance_env, tmp_path_factory):
    """An IPPO run on Tic-Tac-Toe: (runs root, its directory)."""
    runs = tmp_path_factory.mktemp("runs")
    done = subprocess.run(
        run_args("ttt", runs, "ippo", total=STEPS, env_id=TTT, extras={"fastlane_record": 1}), env=xuance_env, capture_output=True, text=True,
        timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return runs, runs / "ttt"


def mosaic(xuance_env, *args, timeout=300):
    return subprocess.run([*MOSAIC, *args], env=xuance_env, capture_output=True, text=True, timeout=timeout)


def test_both_seats_learn_with_per_agent_metrics(trained):
    _runs, run_dir = trained
    events = events_of(run_dir)
    assert events[-1]["event"] == "run_completed"
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    assert set(last["agents"]) == SEATS and last["episodes"] >= 100 and 5 <= last["episodic_length"] <= 9
    assert last["episodic_return"] == 0  # a zero-sum game: the team's return is the two seats' sum
    assert all(-1 <= last["agents"][seat]["charts/episodic_return"] <= 1 for seat in SEATS)
    assert {"losses/actor_loss", "losses/critic_loss"} <= set(last["agents"]["player_1"])  # updates happened
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    meta = json.loads((run_dir / "checkpoints" / f"step_{saved[-1]['step']}" / "meta.json").read_text())
    assert meta["env"] == TTT and meta["overrides"]["parallels"] == 4  # what a policy server rebuilds it with


def test_the_board_reaches_fastlane(trained):
    from PIL import Image

    _runs, run_dir = trained
    section = json.loads((run_dir / "manifest.json").read_text())["fastlane"]
    assert section["frames_published"] >= 3 and section["errors"] == []
    pngs = sorted((run_dir / "videos" / "fastlane").glob("*.png"))
    greys = []
    for png in pngs:
        with Image.open(png) as image:
            greys.append(len(image.convert("L").getcolors(1 << 16)))
    assert max(greys) > min(greys)  # PettingZoo's board, its marks changing as the games go


def test_the_worker_lists_the_board_games(xuance_env):
    listed = mosaic(xuance_env, "algos", "--worker", "xuance", "--json")
    assert listed.returncode == 0, listed.stderr
    envs = {entry["algo"]: entry["envs"] for entry in json.loads(listed.stdout)["algorithms"]}
    for algo in ("ippo", "mappo"):
        assert {TTT, "classic/connect_four_v3"} <= set(envs[algo]), envs[algo]
    assert TTT not in envs["qmix"]  # the worker's configs are IPPO's and MAPPO's


def test_the_run_takes_either_seat_against_random(trained, xuance_env):
    runs, _run_dir = trained
    wins = losses = 0
    for seat in sorted(SEATS):
        other = (SEATS - {seat}).pop()
        played = mosaic(
            xuance_env, "match", "tictactoe_v3", "--seat", f"{seat}=run:ttt", "--seat", f"{other}=random",
            "--episodes", "20", "--seeds", "0", "--runs-dir", str(runs), "--run-id", f"match-{seat}",
        )  # fmt: skip
        assert played.returncode == 0, played.stderr
        record = json.loads((runs / f"match-{seat}" / "match.json").read_text())
        served = record["seats"][seat]
        assert record["status"] == "completed" and served["operator"] == "run:ttt"
        assert served["illegal_actions"] == 0 and served["forfeits"] == 0  # the mask learned in training holds
        assert served["wins"] + served["losses"] + served["draws"] == 20
        wins, losses = wins + served["wins"], losses + served["losses"]
    assert wins > losses  # a few thousand steps of self-play beat random, over both seats


def test_a_seat_the_run_has_no_policy_for_is_refused(trained, xuance_env):
    runs, _run_dir = trained
    refused = mosaic(
        xuance_env, "match", "connect_four_v3", "--seat", "player_0=run:ttt", "--seat", "player_1=random",
        "--episodes", "1", "--runs-dir", str(runs), "--run-id", "refused",
    )  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "run:ttt" in lines[0] and "player_0" in lines[0], refused.stderr
    assert not (runs / "refused").exists()


def serve(xuance_env, checkpoint, agent, requests):
    """``python -m xuance_worker.serve`` in the XuanCe environment, fed ``requests`` (JSON lines)."""
    python = str(worker_bin(xuance_env, "xuance") / "python")
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    command = [python, "-m", "xuance_worker.serve", "--checkpoint", str(checkpoint), "--agent", agent]
    return subprocess.run(command, env=xuance_env, input=lines, capture_output=True, text=True, timeout=300)


def test_the_server_speaks_the_protocol_and_obeys_the_mask(trained, xuance_env):
    _runs, run_dir = trained
    checkpoint = run_dir / "checkpoints" / f"step_{STEPS}"
    board = [0.0] * 18
    only_four = [1.0 if cell == 4 else 0.0 for cell in range(9)]  # one legal move left: the centre
    done = serve(xuance_env, checkpoint, "player_2", [
        {"cmd": "act", "observation": board + only_four}, {"cmd": "act", "observation": [0.0] * 5}, {"cmd": "jump"},
        {"cmd": "stop"},
    ])  # fmt: skip
    assert done.returncode == 0, done.stderr
    ready, act, short, unknown, stopped = (json.loads(line) for line in done.stdout.splitlines())
    assert ready["type"] == "ready" and ready["agent"] == "player_2" and ready["policy"]["step"] == STEPS
    assert ready["observation_space"]["shape"] == [27] and ready["action_space"] == {"type": "Discrete", "n": 9}
    assert act == {"type": "act", "action": 4}
    assert short["type"] == "error" and "[27]" in short["message"]
    assert unknown["type"] == "error" and "jump" in unknown["message"] and stopped == {"type": "stopped"}


def test_a_checkpoint_naming_a_key_its_run_could_not_have_is_refused(trained, xuance_env, tmp_path):
    _runs, run_dir = trained
    doctored = tmp_path / "step_1"
    shutil.copytree(run_dir / "checkpoints" / f"step_{STEPS}", doctored)
    meta = json.loads((doctored / "meta.json").read_text())
    meta["overrides"]["log_dir"] = "/tmp/elsewhere"
    (doctored / "meta.json").write_text(json.dumps(meta))
    done = serve(xuance_env, doctored, "player_1", [{"cmd": "stop"}])
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: checkpoint") and "log_dir" in done.stderr
