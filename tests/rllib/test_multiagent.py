"""RLlib multi-agent runs through the real `mosaic run` (PettingZoo in the worker's environment):
MPE with one policy per agent reports each agent's metrics as XuanCe's worker does; self-play on
Tic-Tac-Toe is Ctrl-C'd part-way, resumed with its pool of past policies restored from the
checkpoint's data, and `mosaic evaluate` shows it beating a random legal-move opponent with a 95 %
interval above one half; the resumed run takes a seat in `mosaic match` (`run:ID`, served from the
worker's environment) and in a `mosaic league` with a CleanRL policy trained in a seat, `random` and a
script; self-play on MPE's simple_push_v3 keeps a pool per side and seats its agent; a single-agent run
trained in a seat takes it; what a multi-agent run, or a seat, refuses: one line, exit 2."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from tests.conftest import ctrl_c_at
from tests.rllib.conftest import MOSAIC, events_of, refuse, run_args, run_mosaic

pytestmark = pytest.mark.slow

GAME = "classic/tictactoe_v3"
SELF_PLAY = {"pool_size": 5, "snapshot_every": 3}
BUDGET = 8000  # 16 iterations of 500 env steps (conftest.SMALL): snapshots at 3, 6, 9, 12, 15
PARAMS = {"lr": 5e-4}  # RLlib's default (5e-5) learns too slowly for a short test
STOP_AFTER = 2500
GAMES = 100  # against random: a 95 % Wilson interval about ±0.1 wide
SEED = 5


def _metric_steps(run_dir):
    return [e["payload"]["global_step"] for e in events_of(run_dir) if e["event"] == "metrics"]


def _pool(checkpoint):
    folder = checkpoint / "self_play_pool"
    record = json.loads((folder / "pool.json").read_text())
    weights = {}
    for slot in record["slots"]:
        with np.load(folder / f"{slot['module']}.npz", allow_pickle=False) as arrays:
            weights[slot["module"]] = {name: arrays[name] for name in arrays.files}
    return record, weights


def _checkpoints(run_dir):
    return [e["payload"] for e in events_of(run_dir) if e["event"] == "checkpoint_saved"]


@pytest.fixture(scope="module")
def self_play(rllib_env, tmp_path_factory):
    """{"killed": a self-play run Ctrl-C'd part-way, "resumed": its resume to the budget}."""
    runs = tmp_path_factory.mktemp("runs")
    extras = {"self_play": SELF_PLAY}
    proc = subprocess.Popen(
        run_args("killed", runs, total=BUDGET, env_id=GAME, params=PARAMS, extras=extras, more=("--seed", str(SEED))),
        env=rllib_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    err = ctrl_c_at(proc, runs / "killed", STOP_AFTER)
    assert proc.returncode == 130, err
    resume = {**extras, "mode": "resume", "checkpoint_path": str(runs / "killed")}
    done = run_mosaic(
        run_args("resumed", runs, total=BUDGET, env_id=GAME, params=PARAMS, extras=resume, more=("--seed", str(SEED))),
        rllib_env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {"killed": runs / "killed", "resumed": runs / "resumed", "runs": runs}


def test_stop_and_resume_keep_the_pool_of_past_policies(self_play):
    [stopped] = _checkpoints(self_play["killed"])
    assert stopped["reason"] == "cancelled"
    record, weights = _pool(self_play["killed"] / "checkpoints" / f"step_{stopped['step']}")
    iteration = stopped["iteration"]
    assert record["iteration"] == iteration and record["snapshots"] == iteration // SELF_PLAY["snapshot_every"]
    assert len(weights) == SELF_PLAY["pool_size"]
    resumed = events_of(self_play["resumed"])
    [note] = [e["payload"]["text"] for e in resumed if "self-play pool restored" in e["payload"].get("text", "")]
    assert all(f"{s['module']} of iteration {s['iteration']}" in note for s in record["slots"]), note
    final = _checkpoints(self_play["resumed"])[-1]
    assert final["step"] == BUDGET and final["reason"] == "final"
    last, last_weights = _pool(self_play["resumed"] / "checkpoints" / f"step_{BUDGET}")
    assert last["snapshots"] == final["iteration"] // SELF_PLAY["snapshot_every"] > record["snapshots"]
    # A slot no snapshot overwrote after the stop holds the stopped run's weights, exactly.
    kept = [s["module"] for s in last["slots"] if 0 < s["iteration"] <= iteration]
    assert kept, last
    for module in kept:
        for name, value in weights[module].items():
            np.testing.assert_array_equal(last_weights[module][name], value)
    # ...and newer slots hold later weights: the pool went on filling.
    newer = [s["module"] for s in last["slots"] if s["iteration"] > iteration]
    assert newer and any(not np.array_equal(last_weights[m][n], weights[m][n]) for m in newer for n in weights[m])


def test_self_play_reports_main_and_each_seat(self_play):
    metrics = [e["payload"] for e in events_of(self_play["resumed"]) if e["event"] == "metrics"]
    last = metrics[-1]
    assert {"self_play/main_return", "self_play/win_rate"} <= set(last["scalars"])
    assert set(last["agents"]) == {"player_1", "player_2"}  # no pool module reports (none trains)
    assert "charts/episodic_return" in last["agents"]["player_1"]


def test_evaluate_beats_random_with_a_confidence_interval(self_play, rllib_env):
    done = subprocess.run(
        [*MOSAIC, "evaluate", "resumed", "--episodes", str(GAMES), "--runs-dir", str(self_play["runs"]), "--json"],
        env=rllib_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["schema"] == "mosaic.eval/1" and result["env_id"] == GAME and result["opponent"] == "random"
    assert result["global_step"] == BUDGET and len(result["episodes"]) == GAMES
    seats = [e["seat"] for e in result["episodes"]]
    assert seats == ["player_1", "player_2"] * (GAMES // 2)  # alternating seats
    outcomes = result["outcomes"]
    counted = {name: sum(e["outcome"] == name for e in result["episodes"]) for name in ("win", "draw", "loss")}
    assert {name: outcomes[name]["count"] for name in counted} == counted and sum(counted.values()) == GAMES
    for episode in result["episodes"]:
        own, other = (
            episode["agents"][episode["seat"]],
            sum(episode["agents"].values()) - episode["agents"][episode["seat"]],
        )
        assert episode["outcome"] == ("win" if own > other else "loss" if own < other else "draw")
    low, high = outcomes["win"]["ci95"]
    assert low < outcomes["win"]["rate"] < high
    print(f"against random: {counted}, win rate 95 % CI [{low:.3f}, {high:.3f}]")
    assert low > 0.5, outcomes


def test_mpe_trains_each_agent_its_own_policy_with_frames(rllib_env, tmp_path):
    done = run_mosaic(
        run_args(
            "mpe",
            tmp_path,
            total=1000,
            env_id="mpe/simple_spread_v3",
            extras={"policies": "separate", "fastlane_record": 1},
        ),
        rllib_env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from mosaic_analytics.curves import read_scalars

    run_dir = tmp_path / "mpe"
    last = [e["payload"] for e in events_of(run_dir) if e["event"] == "metrics"][-1]
    agents = last["agents"]
    assert set(agents) == {"agent_0", "agent_1", "agent_2"}
    for values in agents.values():
        assert values["charts/episodic_return"] < 0  # simple_spread: minus the distances
        assert "losses/policy_loss" in values  # its own policy's
    assert last["episodic_return"] < 0  # the team's: the agents' summed
    for agent in agents:  # TensorBoard: TAG/AGENT, as the XuanCe worker writes them
        assert read_scalars(run_dir, f"charts/episodic_return/{agent}").steps
    step = _checkpoints(run_dir)[-1]["step"]
    saved = json.loads((run_dir / "checkpoints" / f"step_{step}" / "mosaic_step.json").read_text())
    assert saved["multiagent"]["agents"] == {a: a for a in agents}
    # Frames: the multi-agent env runner's env rendered (MPE's arena), from the env runner's process.
    from PIL import Image

    section = json.loads((run_dir / "manifest.json").read_text())["fastlane"]
    assert section["frames_published"] >= 1 and section["errors"] == []
    with Image.open(sorted((run_dir / "videos" / "fastlane").glob("*.png"))[-1]) as image:
        assert image.size == (700, 700)


BAD = {
    "unknown agent": (
        "mpe/simple_spread_v3",
        {"policies": {"agent_0": "a", "agent_1": "a", "agent_9": "b"}},
        "extras.policies.agent_9: the env has no agent 'agent_9'",
    ),
    "agent left out": ("mpe/simple_spread_v3", {"policies": {"agent_0": "a"}}, "names no policy for agent 'agent_1'"),
    "policies on a single-agent env": ("CartPole-v1", {"policies": "separate"}, "CartPole-v1 is a single-agent env"),
    "self-play on a single-agent env": ("CartPole-v1", {"self_play": True}, "extras.self_play is for multi-agent"),
    "self-play on a parallel env": ("mpe/simple_spread_v3", {"self_play": True}, "needs a two-player turn-based game"),
    "bad pool size": (GAME, {"self_play": {"pool_size": 0}}, "extras.self_play.pool_size must be a whole number"),
    "both": (GAME, {"self_play": True, "policies": "shared"}, "extras.policies and extras.self_play are both given"),
    "unknown game": ("classic/tictactoe_v9", {}, "'classic/tictactoe_v9' is not a PettingZoo env"),
}


@pytest.mark.parametrize("case", BAD)
def test_refused_in_one_line(case, rllib_env, tmp_path):
    env_id, extras, words = BAD[case]
    refuse(
        run_args("bad", tmp_path / "runs", env_id=env_id, extras=extras), rllib_env, words, tmp_path / "runs" / "bad"
    )


def test_connect_four_self_play_is_checked_in_the_workers_environment(rllib_env, tmp_path):
    """The dry run builds the self-play config (action-masking modules, the pool) without training."""
    done = subprocess.run(
        run_args(
            "c4",
            tmp_path,
            env_id="classic/connect_four_v3",
            extras={"self_play": True},
            more=("--dry-run", "--emit-summary"),
        ),
        env=rllib_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "RLlib PPO on classic/connect_four_v3" in done.stdout and not (tmp_path / "c4").exists()


# The arena: the self-play run as an operator (`run:resumed`), served by the worker's environment.
ARENA_GAME = "tictactoe_v3"  # the arena's name of classic/tictactoe_v3
CLEANRL_SEATED = "ttt-ppo"
XUANCE_BOTH_SEATS = "ttt-ippo"
LEAGUE_OPERATORS = {  # a policy of another worker joins with a line: NAME = "run:ITS_RUN" (trained in `runs`)
    "rllib": "run:resumed",
    "cleanrl": f"run:{CLEANRL_SEATED}",
    "xuance": f"run:{XUANCE_BOTH_SEATS}",
    "random": "random",
    "first-legal": "scripted:first-legal",
}
LEAGUE_GAMES = 4  # per match; each pair plays a match in each seat order


def _mosaic(env, *args, timeout=600):
    return subprocess.run(
        [*MOSAIC, *args], env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _match(env, runs, run_id, seats, episodes, game=ARENA_GAME):
    seat_args = [word for seat in seats for word in ("--seat", seat)]
    return _mosaic(env, "match", game, *seat_args, "--episodes", str(episodes), "--seeds", "0",
                   "--runs-dir", str(runs), "--run-id", run_id)  # fmt: skip


def _servers(runs) -> list[str]:
    """Command lines of policy servers still running for checkpoints under ``runs``."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ray_worker.serve" in command and str(runs) in command:
            found.append(command)
    return found


def test_the_self_play_policy_takes_either_seat_against_random_and_a_script(self_play, rllib_env):
    pytest.importorskip("mosaic_example_plugin.operators")  # scripted:first-legal's entry point
    runs = self_play["runs"]
    for run_id, seats, policy_seat in (
        ("vs-random", ["player_1=run:resumed", "player_2=random"], "player_1"),
        ("vs-script", ["player_1=scripted:first-legal", "player_2=run:resumed"], "player_2"),
    ):
        done = _match(rllib_env, runs, run_id, seats, episodes=6)
        assert done.returncode == 0, done.stderr[-3000:]
        record = json.loads((runs / run_id / "match.json").read_text())
        policy = record["seats"][policy_seat]
        assert record["status"] == "completed" and policy["operator"] == "run:resumed"
        assert policy["wins"] + policy["draws"] + policy["losses"] == 6
        # The board and mask reach the action-masking module apart: it never plays an illegal move.
        assert policy["illegal_actions"] == 0 and policy["forfeits"] == 0 and policy["actions"] >= 2 * 6
    # Greedy against a deterministic script: the same game every time, whatever the seed.
    episodes = json.loads((runs / "vs-script" / "match.json").read_text())["episodes_played"]
    assert len({json.dumps(e["returns"], sort_keys=True) for e in episodes}) == 1
    assert len({e["steps"] for e in episodes}) == 1
    assert not _servers(runs)


def test_a_run_that_cannot_take_the_seat_is_refused_in_one_line(self_play, rllib_env):
    runs = self_play["runs"]
    no_checkpoint = runs / "no-checkpoint"
    shutil.copytree(runs / "resumed", no_checkpoint, ignore=shutil.ignore_patterns("checkpoints", "ray"))
    other_env = runs / "other-env"
    shutil.copytree(runs / "resumed", other_env, ignore=shutil.ignore_patterns("ray"))
    for step_file in other_env.glob("checkpoints/*/mosaic_step.json"):
        step_file.write_text(json.dumps({**json.loads(step_file.read_text()), "env_id": "classic/connect_four_v3"}))
    shared = runs / "shared"  # RLlib's module files are pickles: one another user may write is never loaded
    shutil.copytree(runs / "resumed", shared, ignore=shutil.ignore_patterns("ray"))
    for step_file in shared.glob("checkpoints/*/mosaic_step.json"):
        step_file.chmod(0o664)
    for game, seats, words in (
        (ARENA_GAME, ["player_1=run:shared", "player_2=random"], "is writable by others (mode 664); refused"),
        (ARENA_GAME, ["player_1=run:no-checkpoint", "player_2=random"], "run no-checkpoint has no checkpoint"),
        (ARENA_GAME, ["player_1=run:other-env", "player_2=random"], "checkpoint of env classic/connect_four_v3"),
        (
            "connect_four_v3",
            ["player_0=random", "player_1=run:resumed"],
            "does not fit seat player_1 of connect_four_v3: its observations have shape [27]",
        ),
        ("connect_four_v3", ["player_0=run:resumed", "player_1=random"], "has no policy for agent 'player_0'"),
        (
            "simple_spread_v3",
            ["agent_0=run:resumed", "agent_1=random", "agent_2=random"],
            "no policy for agent 'agent_0'",
        ),
    ):
        done = _match(rllib_env, runs, "refused", seats, episodes=1, game=game)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and words in lines[0], done.stderr[-3000:]
        assert "Traceback" not in done.stderr and not (runs / "refused").exists()
    assert not _servers(runs)


@pytest.fixture(scope="module")
def cleanrl_seated(self_play, rllib_env):
    """A CleanRL PPO run trained briefly in a Tic-Tac-Toe seat, beside the self-play run."""
    done = _mosaic(rllib_env, "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id",
                   "mosaic/TicTacToe-vs-random-v0", "--total-timesteps", "2048", "--runs-dir", str(self_play["runs"]),
                   "--run-id", CLEANRL_SEATED, "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return self_play["runs"]


@pytest.fixture(scope="module")
def xuance_both_seats(cleanrl_seated, xuance_env):
    """A XuanCe IPPO run trained briefly on Tic-Tac-Toe (both seats learning), beside the other two."""
    done = _mosaic(xuance_env, "run", "--worker", "xuance", "--algo", "ippo", "--env-id", "classic/tictactoe_v3",
                   "--total-timesteps", "3000", "--extras", '{"parallels": 4}', "--runs-dir", str(cleanrl_seated),
                   "--run-id", XUANCE_BOTH_SEATS, "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return cleanrl_seated


def test_a_league_of_workers_policies_a_script_and_random_is_rated(xuance_both_seats, rllib_env, tmp_path):
    pytest.importorskip("openskill")
    pytest.importorskip("mosaic_example_plugin.operators")
    runs = xuance_both_seats  # an RLlib, a CleanRL and a XuanCe run, each served from its own worker's process
    lines = ['name = "workers"', f'env = "{ARENA_GAME}"', f"games = {LEAGUE_GAMES}", "first_seed = 0", "[operators]"]
    spec = tmp_path / "league.toml"
    spec.write_text("\n".join([*lines, *(f'{name} = "{op}"' for name, op in LEAGUE_OPERATORS.items())]) + "\n")
    done = _mosaic(rllib_env, "league", str(spec), "--runs-dir", str(runs), "--json", timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    # A policy's server is started once per seat it takes and kept across the league's 20 matches.
    assert "workers: 6 policy servers (one per run: operator and seat) served its matches" in done.stderr
    standings = json.loads(done.stdout)
    assert standings == json.loads((runs / "league-workers.json").read_text())
    names = list(LEAGUE_OPERATORS)
    others = len(names) - 1
    assert all(m["completed"] for m in standings["matches"]) and len(standings["matches"]) == len(names) * others
    for name in names:
        rating = standings["ratings"][name]
        assert rating["games"] == 2 * LEAGUE_GAMES * others and rating["ci95"][0] <= rating["ci95"][1]
    matrix = standings["cross_play"]
    for row in names:
        assert matrix[row][row] is None
        for column in (n for n in names if n != row):
            cell = matrix[row][column]
            assert cell["games"] == 2 * LEAGUE_GAMES and cell["ci95"][0] <= cell["score"] <= cell["ci95"][1]
            assert cell["score"] + matrix[column][row]["score"] == pytest.approx(1.0)
    masked = {
        "run:resumed",
        f"run:{XUANCE_BOTH_SEATS}",
    }  # RLlib's and XuanCe's policies obey the masks they learnt with
    for match in standings["matches"]:
        seats = json.loads((runs / match["run_id"] / "match.json").read_text())["seats"]
        assert match["completed"] and set(LEAGUE_OPERATORS.values()) >= {seat["operator"] for seat in seats.values()}
        for seat in seats.values():
            assert seat["operator"] not in masked or seat["illegal_actions"] == 0, seat
    shown = _mosaic(rllib_env, "league", "show", str(spec), "--runs-dir", str(runs), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["ratings"] == standings["ratings"], shown.stderr
    assert not _servers(runs)


MPE_GAME = "mpe/simple_push_v3"  # adversary_0 (8 observations) against agent_0 (19): two sides


def test_mpe_self_play_keeps_a_pool_per_side_and_its_policy_takes_a_seat(rllib_env, tmp_path):
    extras = {"self_play": {"pool_size": 2, "snapshot_every": 1}}
    done = run_mosaic(
        run_args("push", tmp_path, total=1500, env_id=MPE_GAME, extras=extras, more=("--seed", "1")), rllib_env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "push"
    final = _checkpoints(run_dir)[-1]
    checkpoint = run_dir / "checkpoints" / f"step_{final['step']}"
    saved = json.loads((checkpoint / "mosaic_step.json").read_text())["multiagent"]
    assert saved["agents"] == {"adversary_0": "main_adversary", "agent_0": "main_agent"}
    record, weights = _pool(checkpoint)
    assert record["snapshots"] == final["iteration"] == 3  # 500 env steps an iteration, a snapshot after each
    slots = {slot["module"]: slot["iteration"] for slot in record["slots"]}
    assert slots == {"pool_adversary_0": 3, "pool_agent_0": 3, "pool_adversary_1": 2, "pool_agent_1": 2}
    for side, observations in (("adversary", 8), ("agent", 19)):  # each side's pool: its own policy's inputs
        newest, older = weights[f"pool_{side}_0"], weights[f"pool_{side}_1"]
        assert any(value.ndim == 2 and value.shape[1] == observations for value in newest.values()), side
        assert any(not np.array_equal(newest[name], older[name]) for name in newest), side  # main learned between
    scalars = [e["payload"]["scalars"] for e in events_of(run_dir) if e["event"] == "metrics"][-1]
    assert {"self_play/main_return_adversary", "self_play/main_return_agent"} <= set(scalars)
    # The agent side's policy takes its seat in the arena's simple_push_v3, against a random adversary.
    played = _match(rllib_env, tmp_path, "push-match", ["adversary_0=random", "agent_0=run:push"], 2, "simple_push_v3")
    assert played.returncode == 0, played.stderr[-3000:]
    record = json.loads((tmp_path / "push-match" / "match.json").read_text())
    seat = record["seats"]["agent_0"]
    assert seat["operator"] == "run:push" and seat["illegal_actions"] == 0
    assert seat["actions"] == sum(e["steps"] for e in record["episodes_played"]) > 0
    assert not _servers(tmp_path)


def test_a_single_agent_run_trained_in_a_seat_takes_it(rllib_env, tmp_path):
    """RLlib's gymnasium 1.x reads no plugin group: the seated id names its module (gymnasium's MODULE:ID)."""
    seated = "mosaic_arena.gym_ids:mosaic/TicTacToe-vs-random-v0"
    done = run_mosaic(run_args("seated", tmp_path, total=1000, env_id=seated), rllib_env)
    assert done.returncode == 0, done.stderr[-3000:]
    played = _match(rllib_env, tmp_path, "seated-match", ["player_1=random", "player_2=run:seated"], 4)
    assert played.returncode == 0, played.stderr[-3000:]
    seat = json.loads((tmp_path / "seated-match" / "match.json").read_text())["seats"]["player_2"]
    assert seat["operator"] == "run:seated" and seat["wins"] + seat["losses"] + seat["draws"] == 4
    assert seat["actions"] >= 4 and seat["mean_time_per_action_s"] > 0  # (a policy this young may still forfeit)
    assert not _servers(tmp_path)
