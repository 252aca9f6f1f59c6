"""The run contract for the RLlib worker (docs/run-contract.md), through the real `mosaic run`: a PPO
run on CartPole Ctrl-C'd part-way (SIGINT to its terminal's process group; the contract suite
SIGTERMs one), without checkpoint_frequency, saves its last completed iteration as
`checkpoints/step_N` at once and ends cancelled; resumed into a new run it continues from exactly N
to the budget, its learning rate at each step the schedule's value; evaluation writes
`eval.json` (mosaic.eval/1) with seeded episodes."""

import json
import math
import subprocess
import time

import pytest

from tests.conftest import ctrl_c_at
from tests.rllib.conftest import alive, events_of, ray_pids, refuse, run_args, run_mosaic

pytestmark = pytest.mark.slow

BUDGET = 6000  # 12 iterations of 500 env steps (conftest.SMALL)
# Ctrl-C once the host reports this many steps: 9 iterations are left, seconds on a busy machine, for
# the Ctrl-C to reach the training process (with 5, a run that sped up finished before it did)
STOP_AFTER = 1500
EXTRAS = {"metrics_interval_s": 0.05}  # each iteration's step reported as it ends
PARAMS = {"lr": [[0, 1e-3], [BUDGET, 1e-5]]}  # PPO's learning rate, annealed over the env steps
SEED = 3


def _run(rllib_env, runs, run_id, extras=None, total=BUDGET, seed=SEED):
    more = ("--seed", str(seed)) if seed is not None else ()
    done = run_mosaic(
        run_args(run_id, runs, total=total, params=PARAMS, extras={**EXTRAS, **(extras or {})}, more=more), rllib_env
    )
    assert done.returncode == 0, done.stderr
    return runs / run_id


def _metric_steps(run_dir):
    return [e["payload"]["global_step"] for e in events_of(run_dir) if e["event"] == "metrics"]


def _scalars(run_dir, tag):
    from mosaic_analytics.curves import read_scalars

    found = read_scalars(run_dir, tag)
    return dict(zip(found.steps, found.values))


@pytest.fixture(scope="module")
def runs(rllib_env, tmp_path_factory):
    """{"killed": a run Ctrl-C'd part-way, "resumed": its resume into a new run}."""
    runs = tmp_path_factory.mktemp("runs")
    found = {}
    proc = subprocess.Popen(
        run_args("killed", runs, total=BUDGET, params=PARAMS, extras=EXTRAS, more=("--seed", str(SEED))),
        env=rllib_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as at a terminal: Ctrl-C signals the group
    )
    err = ctrl_c_at(proc, runs / "killed", STOP_AFTER)
    assert proc.returncode == 130, err
    found["killed"] = runs / "killed"
    found["resumed"] = _run(
        rllib_env, runs, "resumed", extras={"mode": "resume", "checkpoint_path": str(found["killed"])}
    )
    return found


def _stop_checkpoint(run_dir):
    saved = [e["payload"] for e in events_of(run_dir) if e["event"] == "checkpoint_saved"]
    assert [s["reason"] for s in saved] == ["cancelled"], saved  # no checkpoint_frequency: only the stop's
    return saved[0]


def test_ctrl_c_saves_the_last_completed_iteration(runs):
    killed = runs["killed"]
    events = events_of(killed)
    assert events[-1]["event"] == "run_cancelled" and events[-1]["payload"]["resumable"] is True
    saved = _stop_checkpoint(killed)
    step = saved["step"]
    assert STOP_AFTER <= step < BUDGET and step % 500 == 0
    assert saved["path"] == str(killed / "checkpoints" / f"step_{step}") and saved["format"] == "ray.rllib"
    assert (killed / "checkpoints" / f"step_{step}" / "rllib_checkpoint.json").is_file()
    assert not [p for p in (killed / "checkpoints").iterdir() if p.name.startswith(".")]  # no temporary left
    # What `mosaic runs` shows is the step the run trained to, the checkpoint's.
    assert _metric_steps(killed)[-1] == step
    [pid] = {e["payload"]["pid"] for e in events if e["event"] == "heartbeat"}
    deadline = time.monotonic() + 10  # Ray's workers notice their raylet is gone within a second or two
    while (left := [p for p in ray_pids(killed, pid) if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes of the run's Ray cluster outlived it: {left}"


def test_resume_continues_from_exactly_the_checkpoint(runs):
    step = _stop_checkpoint(runs["killed"])["step"]
    resumed = runs["resumed"]
    events = events_of(resumed)
    assert events[-1]["event"] == "run_completed"
    steps = _metric_steps(resumed)
    assert steps and steps[0] > step and steps[-1] == BUDGET
    assert all(a < b for a, b in zip(steps, steps[1:])), steps
    returns = sorted(_scalars(resumed, "charts/episodic_return"))
    assert returns and returns[0] > step and returns[-1] == BUDGET  # no gap, no overlap with the killed run's
    killed_returns = sorted(_scalars(runs["killed"], "charts/episodic_return"))
    assert killed_returns[-1] == step
    final = [e["payload"] for e in events if e["event"] == "checkpoint_saved"][-1]
    killed_iteration = _stop_checkpoint(runs["killed"])["iteration"]
    assert final["step"] == BUDGET and final["iteration"] == killed_iteration + (BUDGET - step) // 500


def _scheduled(step):
    """PARAMS' learning rate at env step ``step``: RLlib interpolates linearly between its points."""
    (start, first), (end, last) = PARAMS["lr"]
    return first + (last - first) * (step - start) / (end - start)


def test_learning_rate_continues_its_schedule(runs):
    """What each iteration logs is the schedule's value at its step, before the stop and after
    the resume (an uninterrupted run logs the same, iteration by iteration)."""
    step = _stop_checkpoint(runs["killed"])["step"]
    killed = _scalars(runs["killed"], "charts/learning_rate")
    resumed = _scalars(runs["resumed"], "charts/learning_rate")
    assert sorted(killed) == list(range(500, step + 1, 500)) and sorted(resumed) == list(
        range(step + 500, BUDGET + 1, 500)
    )
    for series in (killed, resumed):
        for at, lr in series.items():
            assert math.isclose(lr, _scheduled(at), rel_tol=1e-5), (at, lr, _scheduled(at))
    assert resumed[BUDGET] < killed[step] < killed[500]  # it anneals


def test_evaluate_writes_the_eval_schema(runs, rllib_env, tmp_path):
    checkpoint = _stop_checkpoint(runs["killed"])
    extras = {
        "mode": "evaluate",
        "checkpoint_path": str(runs["killed"]),
        "eval_episodes": 3,
        "eval_deterministic": True,
    }
    # No --seed: the first evaluation seed is the checkpoint's training seed + 1,000,000.
    results = [
        json.loads((_run(rllib_env, tmp_path, f"eval{i}", extras=extras, seed=None) / "eval.json").read_text())
        for i in range(2)
    ]
    result = results[0]
    assert result["schema"] == "mosaic.eval/1" and result["worker"] == "rllib" and result["algo"] == "PPO"
    assert result["env_id"] == "CartPole-v1" and result["checkpoint"] == checkpoint["path"]
    assert result["global_step"] == checkpoint["step"]
    assert result["protocol"] == {
        "episodes": 3,
        "deterministic": True,
        "first_seed": SEED + 1_000_000,
        "normalization": "frozen",
    }
    assert [e["seed"] for e in result["episodes"]] == [SEED + 1_000_000 + i for i in range(3)]
    assert all(e["return"] == e["length"] > 0 for e in result["episodes"])  # CartPole: 1 per step
    returns = [e["return"] for e in result["episodes"]]
    assert math.isclose(result["mean"], sum(returns) / 3)
    # The same seeds and the greedy action: the same episodes.
    assert returns == [e["return"] for e in results[1]["episodes"]]


def test_eval_every_checkpoint(rllib_env, tmp_path):
    extras = {"checkpoint_frequency": 1000, "eval_every_checkpoint": True, "eval_episodes": 2}
    run_dir = _run(rllib_env, tmp_path, "evals", extras=extras, total=2000)
    events = events_of(run_dir)
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    evals = [e["payload"] for e in events if e["event"] == "eval_result"]
    assert [e["global_step"] for e in evals] == [s["step"] for s in saved] == [1000, 2000]
    for result, checkpoint in zip(evals, saved):
        assert result["checkpoint"] == checkpoint["path"] and len(result["episodes"]) == 2
        assert result["protocol"]["first_seed"] == SEED + 1_000_000 and result["mean"] > 0


@pytest.mark.parametrize(
    "algo, env_id, words",
    (("DQN", "CartPole-v1", "of algorithm PPO, not DQN"), ("PPO", "Acrobot-v1", "of env CartPole-v1, not Acrobot-v1")),
)
def test_a_checkpoint_of_another_algorithm_or_env_is_refused(runs, rllib_env, tmp_path, algo, env_id, words):
    extras = {"mode": "resume", "checkpoint_path": str(runs["killed"])}
    refuse(run_args("other", tmp_path, algo, env_id=env_id, extras=extras), rllib_env, words, tmp_path / "other")
