"""The XuanCe worker through `mosaic run`: each algorithm trains a few thousand steps on
simple_spread_v3 in the worker's own environment, with per-agent metrics, TensorBoard files,
FastLane frames, checkpoints, resume, policy evaluation and cancellation."""

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import MOSAIC, SPREAD, events_of, run_args

pytestmark = pytest.mark.slow  # minutes of training: the main lane runs them, the gymnasium 1.x lane skips them

ALGOS = ("mappo", "ippo", "coma", "qmix", "vdn", "iql", "maddpg")
AGENTS = {"agent_0", "agent_1", "agent_2"}
STEPS = 1000
# Every learner updates within STEPS: XuanCe's configs wait 1000 steps (off-policy) or fill 3200
# (COMA, IPPO) first. MAPPO publishes single-mode frames (one env) and records them as PNGs; IPPO
# tiles its four envs.
EARLY = {"start_training": 200}
ON_POLICY_SMALL = {"buffer_size": 400, "n_epochs": 2}
EXTRAS = {
    "mappo": {"fastlane_record": 1, "checkpoint_frequency": 500, "eval_every_checkpoint": True, "eval_episodes": 2},
    "ippo": {"fastlane_video_mode": "grid", **ON_POLICY_SMALL},
    "coma": ON_POLICY_SMALL,
    "qmix": EARLY,
    "vdn": EARLY,
    "iql": EARLY,
    "maddpg": EARLY,
}


# Beyond simple_spread: {name: (algo, env id, steps, extras)}; their agents are not spread's.
OTHER_ENVS = {
    "adversary": ("maddpg", "mpe/simple_adversary_v3", STEPS, {}),
    "warehouse": ("mappo", "robotic_warehouse/rware-tiny-2ag-v2", STEPS, {"parallels": 2}),
}


@pytest.fixture(scope="module")
def trained(xuance_env, tmp_path_factory):
    """The seven runs on simple_spread and those of OTHER_ENVS, two at a time:
    {name: (returncode, stderr, run directory)}."""
    runs = tmp_path_factory.mktemp("runs")
    jobs = {algo: (algo, SPREAD, STEPS, EXTRAS[algo]) for algo in ALGOS} | OTHER_ENVS

    def train(name):
        algo, env_id, total, extras = jobs[name]
        done = subprocess.run(
            run_args(name, runs, algo, total=total, extras=extras, env_id=env_id),
            env=xuance_env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        return name, (done.returncode, done.stderr, runs / name)

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(train, jobs))


@pytest.mark.parametrize("algo", ALGOS)
def test_each_algorithm_trains_with_per_agent_metrics(trained, algo):
    code, err, run_dir = trained[algo]
    assert code == 0, err
    events = events_of(run_dir)
    assert events[-1]["event"] == "run_completed"
    metrics = [e["payload"] for e in events if e["event"] == "metrics"]
    last = metrics[-1]
    assert last["global_step"] >= STEPS - 100 and last["episodes"] >= 30 and last["episodic_length"] == 25
    assert set(last["agents"]) == AGENTS
    team = last["episodic_return"]
    each = [last["agents"][a]["charts/episodic_return"] for a in sorted(AGENTS)]
    assert team < 0 and all(v < 0 for v in each)  # simple_spread: negative distances, the team's is their sum
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["global_step"] == STEPS and saved[-1]["reason"] == "final"
    reported = [last["losses"], *last["agents"].values()]
    assert {k for values in reported for k in values} - {"charts/episodic_return"}, last  # the learner updated
    assert os.path.getsize(os.path.join(saved[-1]["path"], "state.pt")) > 1000
    assert saved[-1]["path"] == str(run_dir / "checkpoints" / f"step_{STEPS}") and saved[-1]["format"] == "xuance"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["metrics"]["agents"].keys() == AGENTS
    assert manifest["tensorboard"]["event_dirs"], manifest["tensorboard"]
    if algo == "mappo":  # an on-policy update happened: its losses per agent (parameter sharing: agent_0's)
        assert {"losses/actor_loss", "losses/critic_loss"} <= set(last["agents"]["agent_0"])
        assert [s["global_step"] for s in saved] == [400, 1000]  # at 500: the state of the update at 400
        evaluated = [e["payload"] for e in events if e["event"] == "eval_result"]
        assert [(e["global_step"], e["episodes"]) for e in evaluated] == [(400, 2), (1000, 2)]
        assert all(e["mean"] < 0 for e in evaluated)
        assert (
            json.loads((run_dir / "checkpoints" / "step_400" / "eval.json").read_text())["mean"] == evaluated[0]["mean"]
        )
    pytest.importorskip("tensorboard")
    from mosaic_analytics.curves import read_agent_scalars, read_scalars

    assert len(read_scalars(run_dir, "charts/episodic_return").steps) == last["episodes"]
    curves = read_agent_scalars(run_dir, "charts/episodic_return")
    assert [c.label.rsplit(" ", 1)[-1] for c in curves] == sorted(AGENTS)
    assert all(len(c.steps) == last["episodes"] for c in curves)


@pytest.mark.parametrize("name", OTHER_ENVS)
def test_other_envs_train_with_their_own_agents(trained, name):
    code, err, run_dir = trained[name]
    assert code == 0, err
    events = events_of(run_dir)
    assert events[-1]["event"] == "run_completed"
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    expected = {"adversary": {"adversary_0", "agent_0", "agent_1"}, "warehouse": {"agent_0", "agent_1"}}[name]
    assert last["global_step"] >= 900 and last["episodes"] >= 2 and set(last["agents"]) == expected
    assert [e["payload"]["reason"] for e in events if e["event"] == "checkpoint_saved"] == ["final"]


def test_frames_reach_fastlane_single_and_grid(trained):
    from PIL import Image

    _code, _err, single = trained["mappo"]
    section = json.loads((single / "manifest.json").read_text())["fastlane"]
    assert section["mode"] == "single" and section["frames_published"] >= 3 and section["errors"] == []
    pngs = sorted((single / "videos" / "fastlane").glob("*.png"))
    assert pngs
    with Image.open(pngs[-1]) as image:
        assert image.size == (700, 700) and image.mode == "RGB"  # MPE renders 700x700
        low, high = image.convert("L").getextrema()
        assert low < high  # a picture: agents and landmarks on the background
    _code, _err, grid = trained["ippo"]
    section = json.loads((grid / "manifest.json").read_text())["fastlane"]
    assert section["mode"] == "grid" and {0, 1, 2, 3} <= {s["env_index"] for s in section["slots"]}


def test_resume_continues_from_the_checkpoint(trained, xuance_env, tmp_path):
    _code, _err, first = trained["mappo"]
    done = subprocess.run(
        run_args("resumed", tmp_path, total=1500, extras={"mode": "resume_training", "checkpoint_path": str(first)}),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    events = events_of(tmp_path / "resumed")
    steps = [e["payload"]["global_step"] for e in events if e["event"] == "metrics"]
    assert steps and min(steps) > 1000 and max(steps) >= 1400
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["global_step"] == 1500 and saved[-1]["path"].endswith("checkpoints/step_1500")


def test_policy_eval_plays_per_agent_episodes(trained, xuance_env, tmp_path):
    """The old mode and key names still work; the summary `mosaic enjoy` reads is written beside eval.json."""
    _code, _err, first = trained["mappo"]
    done = subprocess.run(
        run_args("eval", tmp_path, extras={"mode": "policy_eval", "policy_path": str(first), "eval_episodes": 4}),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["schema"] == "mosaic.eval/1" and len(result["episodes"]) == 4 and result["mean"] < 0
    assert result["checkpoint"].endswith("checkpoints/step_1000") and result["global_step"] == STEPS
    summary = json.loads((tmp_path / "eval" / "eval_summary.json").read_text())
    assert summary["status"] == "completed" and summary["episodes"] == 4
    assert set(summary["agents"]) == AGENTS and summary["return"]["mean"] == pytest.approx(result["mean"])


def test_sigterm_cancels_with_a_checkpoint_and_no_process_left(xuance_env, tmp_path):
    _cancelled(xuance_env, tmp_path, timeout=120)


@pytest.mark.alone  # judged against its grace period, under load of its own making
def test_sigterm_stops_a_run_within_its_grace_period_under_load(xuance_env, tmp_path, busy_cores):
    """The goal: any run stops within 5 s of SIGTERM with every core busy. The training process
    saves its checkpoint and ends by the SIGTERM itself, not by the host's SIGKILL when the grace
    period is over; no time is asserted."""
    grace = 5
    events = _cancelled(xuance_env, tmp_path, timeout=grace + 25, more=("--grace-period", str(grace)), load=busy_cores)
    assert events[-1]["payload"]["returncode"] == -signal.SIGTERM, "the training process outlived its grace period"


def _cancelled(xuance_env, tmp_path, timeout, more=(), load=None):
    """SIGTERM to a run's host once it reports metrics (``load()`` first, if given): the run ends
    cancelled with a checkpoint and no process left; returns its events."""
    proc = subprocess.Popen(
        run_args("cancel", tmp_path, total=10**6, more=more),
        env=xuance_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        events_file = tmp_path / "cancel" / "events.jsonl"
        while time.monotonic() < deadline:
            if events_file.exists() and any(e["event"] == "metrics" for e in events_of(tmp_path / "cancel")):
                break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.5)
        pids = {e["payload"].get("pid") for e in events_of(tmp_path / "cancel") if e["event"] == "heartbeat"}
        if load is not None:
            load()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=timeout)  # a host still alive then fails the test
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    events = events_of(tmp_path / "cancel")
    assert events[-1]["event"] == "run_cancelled"
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved and saved[-1]["reason"] == "cancelled" and os.path.isfile(os.path.join(saved[-1]["path"], "state.pt"))
    for pid in pids - {None}:
        assert not os.path.exists(f"/proc/{pid}"), f"training process {pid} outlived the run"
    return events


def test_algos_lists_algorithms_and_envs(xuance_env):
    done = subprocess.run(
        [*MOSAIC, "algos", "--worker", "xuance", "--json"], env=xuance_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    listed = {e["algo"]: e for e in json.loads(done.stdout)["algorithms"]}
    assert set(listed) == set(ALGOS)
    assert all("mpe/simple_spread_v3" in e["envs"] for e in listed.values())
    assert {"mpe/simple_push_v3", "mpe/simple_adversary_v3"} <= set(listed["maddpg"]["envs"])
    assert "mpe/simple_push_v3" not in listed["qmix"]["envs"] + listed["mappo"]["envs"]  # no config; fails
    assert "robotic_warehouse/rware-tiny-2ag-v2" in listed["mappo"]["envs"]
    # only what this environment can build: no football, StarCraft, magent2, nor rware's old v1 ids; the
    # worker's own configs add PettingZoo's board games (classic/...)
    every = {env for e in listed.values() for env in e["envs"]}
    families = {"mpe", "robotic_warehouse", "classic"}
    assert {env.split("/")[0] for env in every} == families and not any("v1" in e for e in every)
    assert {"classic/tictactoe_v3", "classic/connect_four_v3"} <= set(listed["ippo"]["envs"])


def test_enjoy_replays_a_xuance_run(trained, xuance_env):
    _code, _err, first = trained["mappo"]
    done = subprocess.run(
        [*MOSAIC, "enjoy", "mappo", "--runs-dir", str(first.parent), "--episodes", "2", "--json"],
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # the evaluation's own eval.json, recorded under its run
    assert result["worker"] == "xuance" and len(result["episodes"]) >= 2
    assert all(set(e["agents"]) == AGENTS for e in result["episodes"])
    assert list((first / "evaluations").glob("eval-*/eval.json"))
