"""The run contract with the bundled algorithms, through the real `mosaic run` / `mosaic resume`:
a run SIGTERMed near its middle and resumed is the run it would have been (the same episodic
returns after the resume point as the uninterrupted run: RNG, env, loop and replay-buffer state
saved, DQN's buffer by default), one history in events.jsonl and TensorBoard, and the contract
suite for the CleanRL worker."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from mosaic_core.events import metric_steps, one_history, read_events
from mosaic_core.testing.contract_suite import WorkerContractSuite

from .conftest import scalars

# metrics_interval_s 0.1: the stop is sent once a metric passes half the budget, so the metric
# events come often enough for it to land well before the end on a fast machine (gymnasium 1.x's
# CartPole runs these budgets in a few seconds); it changes nothing the run learns.
QUICK = {"cuda": False, "metrics_interval_s": 0.1}
OFF_POLICY = {**QUICK, "learning_starts": 1000, "buffer_size": 10_000}
# Pendulum's replay: updates from step 300 on, so hundreds cross the stop (at 500) on either side, and
# its 200-step episodes end three times past it
PENDULUM_REPLAY = ("Pendulum-v1", 1_000, {**OFF_POLICY, "learning_starts": 300, "batch_size": 64})
# Every bundled algorithm whose env keeps its state as plain data (classic control): (env, budget, extras).
# Each budget is a few dozen updates (PPO's iterations, DQN's target updates) or hundreds (the replay
# algorithms') on each side of the stop: the final weights and optimizer state are compared exactly.
RUNS = {
    # one epoch an iteration: every update still crosses the resume (the optimizer's state, the
    # schedule), at a quarter of the default's four epochs' cost
    "ppo": ("CartPole-v1", 10_240, {**QUICK, "num_envs": 2, "num_steps": 128, "update_epochs": 1}),
    "dqn": ("CartPole-v1", 6_000, {**QUICK, "learning_starts": 1000, "target_network_frequency": 100}),
    "c51": ("CartPole-v1", 6_000, {**QUICK, "learning_starts": 1000, "target_network_frequency": 100}),
    "ppo_continuous_action": ("Pendulum-v1", 4_096, {**QUICK, "num_steps": 256, "num_minibatches": 4}),
    "sac_continuous_action": PENDULUM_REPLAY,
    "td3_continuous_action": PENDULUM_REPLAY,
    "ddpg_continuous_action": PENDULUM_REPLAY,
}
# The envs whose state lives outside Python, saved as data all the same (cleanrl_worker.resumestate): ALE's
# emulator with CleanRL's Atari preprocessing, MuJoCo's simulator. The env steps are what the resume is
# checked on (Breakout's games are a few hundred steps: the budget keeps a few past the stop), with the
# final weights; the network's updates are a few, each crossing the resume all the same (DQN's: every
# 16th step, past learning_starts and a target update; PPO's: one epoch an iteration).
# No saved model (--no-save-model): its closing evaluation, 10 Breakout episodes with a CNN forward pass a
# step, took as long as the training, and no test here reads it; the final checkpoint is saved all the same.
ATARI = "BreakoutNoFrameskip-v4"
SIMULATED = {
    "ppo_atari": (ATARI, 2048, {**QUICK, "num_envs": 4, "num_steps": 128, "update_epochs": 1, "save_model": False}),
    "dqn_atari": (
        ATARI,
        3000,
        {
            **OFF_POLICY,
            "save_model": False,
            "buffer_size": 3000,
            "target_network_frequency": 500,
            "exploration_fraction": 0.5,
            "train_frequency": 16,
        },
    ),
    "ppo_continuous_action": ("Hopper-v4", 4096, {**QUICK, "num_steps": 512, "num_minibatches": 4, "update_epochs": 2}),
    # Hopper's early episodes are tens of steps: half the budget past the stop is dozens of them
    "sac_continuous_action": ("Hopper-v4", 1_400, {**OFF_POLICY, "learning_starts": 400, "batch_size": 64}),
}
SIMULATORS = {ATARI: "ale_py", "Hopper-v4": "mujoco"}
OFF_POLICY_ALGOS = {
    "dqn",
    "c51",
    "dqn_atari",
    "sac_continuous_action",
    "td3_continuous_action",
    "ddpg_continuous_action",
}


class Runs(WorkerContractSuite):
    worker = "cleanrl"
    env_id = "CartPole-v1"
    seed = 7


@pytest.fixture
def suite(tmp_path):
    runs = Runs()
    runs.folder, runs.runs_root = tmp_path, tmp_path / "runs"
    return runs


def returns_after(run_dir, step):
    """(step, return) of every episode TensorBoard kept past ``step`` (purged steps left out)."""
    (tb_dir,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    return [(s, v) for s, v in scalars(tb_dir)["charts/episodic_return"] if s > step]


# The gymnasium 1.x lane resumes one algorithm per way of meeting gymnasium (PPO's vector loop, DQN's
# and SAC's replay of a discrete and a continuous action, PPO's normalisation wrappers): C51 meets it as
# DQN does, TD3 and DDPG as SAC does (the same env, wrappers, gymcompat and resumestate calls; what
# differs is torch's), so they are `slow` there, as the Atari and MuJoCo runs below are.
SAME_ON_GYM1 = {"c51", "td3_continuous_action", "ddpg_continuous_action"}


@pytest.mark.parametrize(
    "algo", [pytest.param(a, marks=pytest.mark.slow) if a in SAME_ON_GYM1 else a for a in sorted(RUNS)]
)
def test_a_resumed_run_is_the_run_it_would_have_been(algo, suite):
    resume_matches_the_whole_run(suite, algo, *RUNS[algo])


# slow: the gymnasium 1.x lane leaves these runs out; it checks the same saved env state with
# tests/algorithms/test_env_state.py (each env restored into a fresh one goes on identically).
@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(SIMULATED))
def test_a_resumed_run_is_the_run_it_would_have_been_on_atari_and_mujoco(algo, suite):
    env_id = SIMULATED[algo][0]
    if importlib.util.find_spec(SIMULATORS[env_id]) is None:
        pytest.skip(f"{SIMULATORS[env_id]} is not installed (make extras)")
    resume_matches_the_whole_run(suite, algo, *SIMULATED[algo])


def resume_matches_the_whole_run(suite, algo, env_id, total, extras):
    """``algo`` on ``env_id`` SIGTERMed near its middle and continued by the same command again: every
    episode past the resume point has the uninterrupted run's return, at the same step, and the run
    ends with the uninterrupted run's weights and optimizer state, bit for bit; one history."""
    suite.algo, suite.env_id, suite.total_timesteps, suite.extras = algo, env_id, total, extras
    whole = suite.cli(*suite.run_args("whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]

    code, err = suite.stop_at(suite.start(*suite.run_args("cut")), "cut", total // 2)
    cancelled = suite.events("cut")[-1]
    assert cancelled["event"] == "run_cancelled" and code == 130, (cancelled, err[-2000:])
    assert cancelled["payload"]["resumable"] is True
    from_step = cancelled["payload"]["from_step"]
    assert total // 4 < from_step < total

    # the same command again continues it
    again = suite.cli(*suite.run_args("cut"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"mosaic: resuming run cut from step {from_step}" in again.stderr
    if algo in OFF_POLICY_ALGOS:  # the replay buffer is kept by default, its size said
        assert "replay buffer saved with" in (suite.run_dir("cut") / "logs" / "cleanrl.stderr.log").read_text()

    after_whole = returns_after(suite.run_dir("whole"), from_step)
    after_cut = returns_after(suite.run_dir("cut"), from_step)
    assert len(after_whole) >= 2 and after_cut == after_whole
    whole_state, cut_state = (final_state(suite.run_dir(run), total) for run in ("whole", "cut"))
    assert_same_state(whole_state, cut_state)

    # one history: TensorBoard steps of each tag never go back (what the first attempt logged past the
    # checkpoint is purged); two envs ending episodes at one step log that step twice, as CleanRL does
    (tb_dir,) = {p.parent for p in (suite.run_dir("cut") / "runs").rglob("events.out.tfevents.*")}
    for tag, values in scalars(tb_dir).items():
        if not tag.startswith("eval/"):
            steps = [s for s, _ in values]
            assert steps == sorted(steps) and steps[-1] <= total, tag
    if algo.startswith("ppo"):  # the annealed learning rate goes on from the value it had at the stop
        (whole_tb,) = {p.parent for p in (suite.run_dir("whole") / "runs").rglob("events.out.tfevents.*")}
        lr_whole = dict(scalars(whole_tb)["charts/learning_rate"])
        lr_cut = scalars(tb_dir)["charts/learning_rate"]
        resumed = [(step, lr) for step, lr in lr_cut if step > from_step]
        assert resumed and all(lr_whole[step] == lr for step, lr in resumed)  # at resume and after
        assert lr_cut[-1] == max(lr_whole.items())  # its schedule ends where the uninterrupted run's does
    events = read_events(suite.run_dir("cut") / "events.jsonl")
    assert [e["event"] for e in events].count("run_resumed") == 1
    steps = metric_steps(one_history(events))
    assert steps and all(a <= b for a, b in zip(steps, steps[1:])), steps  # never back (the closing metrics
    # event may repeat the last step)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))  # one log, numbered on

    listed = suite.cli("runs", "--runs-dir", str(suite.runs_root), "--json")
    (cut,) = [r for r in json.loads(listed.stdout) if r["run_id"] == "cut"]
    assert cut["status"] == "completed" and cut["attempts"] == 2 and cut["global_step"] <= total


def final_state(run_dir, total):
    """The models and optimizers of a run's checkpoint at its last step (saved as every run ends)."""
    from cleanrl_worker.checkpoint import load_checkpoint

    (path,) = run_dir.glob(f"checkpoints/step_{total}.cleanrl_model")
    ckpt = load_checkpoint(path)
    return {"models": ckpt["models"], "optimizers": ckpt["optimizers"]}


def assert_same_state(whole, cut, at="state"):
    """Every tensor and number of ``whole`` equals ``cut``'s exactly."""
    if isinstance(whole, dict):
        assert whole.keys() == cut.keys(), at
        for key in whole:
            assert_same_state(whole[key], cut[key], f"{at}.{key}")
    elif isinstance(whole, (list, tuple)):
        assert len(whole) == len(cut), at
        for index, (a, b) in enumerate(zip(whole, cut)):
            assert_same_state(a, b, f"{at}[{index}]")
    elif isinstance(whole, torch.Tensor):
        assert torch.equal(whole, cut), f"{at} differs after the resume"
    else:
        assert whole == cut, (at, whole, cut)


def test_a_dqn_resume_without_its_replay_buffer_says_what_it_does(suite):
    """Opted out of the replay buffer, the stop and the resume each say, as a note at the terminal,
    that the resume refills it for learning_starts steps and will not match an uninterrupted run."""
    suite.algo, suite.total_timesteps = "dqn", 4000
    suite.extras = {**RUNS["dqn"][2], "save_replay_buffer": False}
    code, err = suite.stop_at(suite.start(*suite.run_args("lean")), "lean", 2000)
    assert code == 130, err[-2000:]
    from_step = suite.events("lean")[-1]["payload"]["from_step"]
    resumed = suite.cli("resume", "lean", "--runs-dir", str(suite.runs_root), "--json", "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    notes = [e["payload"]["text"] for e in suite.events("lean") if e["event"] == "note"]
    said = f"(--no-save-replay-buffer): a resume from step {from_step} refills it with the restored policy for "
    said += "learning_starts=1000 steps before it trains again"
    assert [n for n in notes if said in n and not n.startswith("resuming: ")], notes  # at the stop
    assert [n for n in notes if said in n and n.startswith("resuming: ")], notes  # at the resume


def test_resume_refusals_leave_the_run_untouched(suite):
    suite.algo, suite.total_timesteps, suite.extras = "ppo", 20_000, RUNS["ppo"][2]
    code, _err = suite.stop_at(suite.start(*suite.run_args("kept")), "kept", 4000)
    assert code == 130
    run_dir = suite.run_dir("kept")
    log = (run_dir / "events.jsonl").read_bytes()
    (newest,) = sorted(run_dir.glob("checkpoints/step_*.cleanrl_model"))[-1:]

    other = suite.cli(*[a if a != "ppo" else "dqn" for a in suite.run_args("kept")])
    suite.one_line(other, "algo 'ppo'", "'dqn'")
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # truncated
    suite.one_line(suite.cli("resume", "kept", "--runs-dir", str(suite.runs_root)), "truncated or corrupt")
    assert (run_dir / "events.jsonl").read_bytes() == log


class TestCleanRLContract(WorkerContractSuite):
    """The contract suite for the CleanRL worker's bundled PPO."""

    worker = "cleanrl"
    algo = "ppo"
    env_id = "CartPole-v1"
    total_timesteps = 16_384
    extras = {"num_envs": 2, "num_steps": 128, "cuda": False}
    evaluate = True


def test_every_checkpoint_is_evaluated_by_the_one_protocol(suite):
    suite.algo, suite.total_timesteps = "dqn", 2000
    suite.extras = {
        "checkpoint_frequency": 1000,
        "eval_every_checkpoint": True,
        "eval_episodes": 3,
        "learning_starts": 500,
        "cuda": False,
    }
    result = suite.cli(*suite.run_args("graded"))
    assert result.returncode == 0, result.stderr[-3000:]
    results = [e["payload"] for e in suite.events("graded") if e["event"] == "eval_result"]
    *graded, saved = results  # each checkpoint's, then CleanRL's of the model it saved at the end
    assert [g["global_step"] for g in graded] == [1000, 2000]
    assert (
        saved["global_step"] == 2000
        and len(saved["episodes"]) == 10
        and saved["checkpoint"].endswith("dqn.cleanrl_model")
    )
    assert json.loads(open(saved["path"]).read())["mean"] == saved["mean"]  # evaluations/saved-model-2000/eval.json
    # the saved model's evaluation plays the seeds mosaic evaluate plays (seed 7 + 1,000,000 on), never training's
    assert [e["seed"] for e in saved["episodes"]] == list(range(1_000_007, 1_000_017))
    for grade in graded:
        assert [e["seed"] for e in grade["episodes"]] == [1_000_007, 1_000_008, 1_000_009]  # seed 7 + 1,000,000
        assert grade["mean"] == pytest.approx(sum(e["return"] for e in grade["episodes"]) / 3)
        assert grade["checkpoint"].endswith(f"checkpoints/step_{grade['global_step']}.cleanrl_model")


def test_evaluate_refuses_bad_input_in_one_line(suite):
    suite.runs_root.mkdir(mode=0o700)
    suite.one_line(
        suite.cli("evaluate", "any", "--episodes", "0", "--runs-dir", str(suite.runs_root)),
        "--episodes must be at least 1, got 0",
    )
    suite.one_line(suite.cli("evaluate", "nope", "--runs-dir", str(suite.runs_root)), "no run 'nope'")
    suite.one_line(
        suite.cli("evaluate", str(suite.folder / "x.cleanrl_model"), "--runs-dir", str(suite.runs_root)), "no such file"
    )
    assert list(suite.runs_root.iterdir()) == []
