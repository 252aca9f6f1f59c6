"""Policy evaluation mode: real checkpoints evaluated in a real subprocess, and through `mosaic run`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SUMMARY_KEYS = {
    "schema",
    "status",
    "env_id",
    "seed",
    "episodes",
    "episodes_total",
    "eval_episodes",
    "batch_size",
    "repeat",
    "gamma",
    "gamma_source",
    "max_episode_steps",
    "deterministic",
    "returns",
    "lengths",
    "discounted_returns",
    "episode_seeds",
    "return",
    "length",
    "discounted_return",
    "rounds",
    "checkpoint",
    "tensorboard_dir",
    "videos",
    "timing",
}
STATS = {"mean", "std", "min", "max", "median"}


def policy_eval(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.policy_eval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )


def evaluated(cwd: Path, checkpoint: Path, *args: str, env_id: str = "CartPole-v1") -> dict:
    proc = policy_eval(cwd, "--policy-path", str(checkpoint), "--env-id", env_id, *args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads((cwd / "eval_summary.json").read_text())


def cartpole_discounted(length: int, gamma: float) -> float:
    """CartPole pays 1 per step: the discounted return of an episode of ``length`` steps."""
    return (1 - gamma**length) / (1 - gamma)


def in_process(out_dir: Path, checkpoint: Path, env_id: str = "CartPole-v1", **options) -> dict:
    """The same evaluation as the command line runs, called in this process (no start-up cost)."""
    from cleanrl_worker.policy_eval import EvalOptions, load_policy, run_evaluation

    opts = EvalOptions(env_id=env_id, **options)
    policy = load_policy(str(checkpoint), env_id, seed=opts.seed, deterministic=opts.deterministic)
    out_dir.mkdir(parents=True, exist_ok=True)
    return run_evaluation(policy, opts, out_dir=out_dir)


def test_summary_and_scalars_from_the_command_line(tmp_path, ppo_checkpoint):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = evaluated(
        tmp_path,
        ppo_checkpoint,
        "--seed",
        "7",
        "--eval-episodes",
        "5",
        "--eval-batch-size",
        "2",
        "--eval-repeat",
        "2",
        "--eval-gamma",
        "0.9",
    )
    assert SUMMARY_KEYS <= summary.keys()
    assert summary["status"] == "completed" and summary["episodes"] == summary["episodes_total"] == 10
    assert len(summary["returns"]) == len(summary["lengths"]) == len(summary["discounted_returns"]) == 10
    assert summary["episode_seeds"] == list(range(7, 17))
    for key, values in (
        ("return", summary["returns"]),
        ("length", summary["lengths"]),
        ("discounted_return", summary["discounted_returns"]),
    ):
        assert set(summary[key]) == STATS
        assert summary[key]["mean"] == pytest.approx(np.mean(values))
        assert summary[key]["std"] == pytest.approx(np.std(values))
        assert summary[key]["median"] == pytest.approx(np.median(values))
        assert summary[key]["min"] == min(values) and summary[key]["max"] == max(values)
    assert [r["round"] for r in summary["rounds"]] == [0, 1]
    assert summary["rounds"][1]["mean"] == pytest.approx(np.mean(summary["returns"][5:]))
    # gamma discounts the return; it is not an episode limit
    assert summary["gamma"] == 0.9 and summary["gamma_source"] == "flag"
    for raw, length, disc in zip(summary["returns"], summary["lengths"], summary["discounted_returns"]):
        assert raw == length and disc == pytest.approx(cartpole_discounted(length, 0.9))
    ckpt = summary["checkpoint"]
    assert ckpt["algo"] == "ppo" and ckpt["env_id"] == "CartPole-v1" and ckpt["global_step"] == 2048
    assert ckpt["path"] == str(ppo_checkpoint.resolve()) and len(ckpt["sha256"]) == 64
    assert not list(tmp_path.glob(".eval_summary.json.*"))  # atomic writes leave no temporary file

    accumulator = EventAccumulator(str(tmp_path / summary["tensorboard_dir"]))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"eval/episodic_return", "eval/episodic_length", "eval/discounted_return", "eval/mean_return"} <= tags
    returns = accumulator.Scalars("eval/episodic_return")
    assert [e.step for e in returns] == list(range(10))
    assert [e.value for e in returns] == pytest.approx(summary["returns"])
    assert [e.value for e in accumulator.Scalars("eval/discounted_return")] == pytest.approx(
        summary["discounted_returns"]
    )
    assert [e.value for e in accumulator.Scalars("eval/mean_return")] == pytest.approx(
        [r["mean"] for r in summary["rounds"]]
    )


def test_same_seed_same_results(tmp_path, ppo_checkpoint):
    options = {"seed": 3, "episodes": 6, "batch_size": 4}
    first, second = (
        in_process(tmp_path / "a", ppo_checkpoint, **options),
        in_process(tmp_path / "b", ppo_checkpoint, **options),
    )
    for key in ("returns", "lengths", "discounted_returns"):
        assert first[key] == second[key]
    other = in_process(tmp_path / "c", ppo_checkpoint, **{**options, "seed": 4})
    assert other["episode_seeds"] == list(range(4, 10)) and first["episode_seeds"] == list(range(3, 9))


def test_greedy_results_do_not_depend_on_batch_size(tmp_path, ppo_checkpoint):
    results = [
        in_process(tmp_path / str(batch), ppo_checkpoint, deterministic=True, episodes=4, batch_size=batch)["returns"]
        for batch in (1, 3, 4)
    ]
    assert results[0] == results[1] == results[2]


def test_episode_limit_checkpoint_gamma_and_video(tmp_path, ppo_checkpoint):
    from PIL import Image

    summary = in_process(tmp_path, ppo_checkpoint, episodes=3, batch_size=2, max_episode_steps=8, capture_video=True)
    assert summary["gamma_source"] == "checkpoint" and summary["gamma"] == 0.99
    assert summary["max_episode_steps"] == 8 and all(length <= 8 for length in summary["lengths"])
    assert len(summary["videos"]) == 2 and all(v.startswith("videos/") for v in summary["videos"])
    for video in summary["videos"]:
        if video.endswith(".gif"):  # no moviepy: Pillow's animated GIF
            with Image.open(tmp_path / video) as image:
                assert image.n_frames > 1


def test_minigrid_checkpoint_uses_the_cnn_agent(tmp_path, minigrid_checkpoint):
    summary = evaluated(
        tmp_path, minigrid_checkpoint, "--eval-episodes", "2", "--eval-batch-size", "2", env_id="MiniGrid-Empty-5x5-v0"
    )
    assert summary["checkpoint"]["observation_space"]["shape"] == [7, 7, 3]
    assert summary["episodes"] == 2 and all(0 < n <= 100 for n in summary["lengths"])


def test_continuous_checkpoint_with_normalisation(tmp_path, continuous_checkpoint):
    summary = in_process(
        tmp_path, continuous_checkpoint, env_id="Pendulum-v1", episodes=2, batch_size=2, max_episode_steps=20
    )
    assert summary["checkpoint"]["normalized_observations"] is True
    assert summary["lengths"] == [20, 20] and all(r < 0 for r in summary["returns"])


@pytest.mark.parametrize("case", ["missing", "corrupt", "wrong_env", "unknown_env", "bad_gamma", "bad_episodes"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, ppo_checkpoint, case):
    path, env_id, extra = str(ppo_checkpoint), "CartPole-v1", []
    if case == "missing":
        path = str(tmp_path / "nothing.cleanrl_model")
    elif case == "corrupt":
        (tmp_path / "cut.cleanrl_model").write_bytes(ppo_checkpoint.read_bytes()[:500])
        path = str(tmp_path / "cut.cleanrl_model")
    elif case == "wrong_env":
        env_id = "Acrobot-v1"
    elif case == "unknown_env":
        env_id = "NoSuchEnv-v0"
    elif case == "bad_gamma":
        extra = ["--eval-gamma", "500"]
    elif case == "bad_episodes":
        extra = ["--eval-episodes", "0"]
    proc = policy_eval(tmp_path / "run", "--policy-path", path, "--env-id", env_id, *extra)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "eval_summary.json").exists()
    if case == "wrong_env":
        assert "Acrobot-v1" in lines[0] and "observation space" in lines[0]


def test_through_mosaic_run(mosaic, runs_root, ppo_checkpoint):
    extras = {
        "mode": "policy_eval",
        "policy_path": str(ppo_checkpoint),
        "eval_episodes": 5,
        "eval_batch_size": 2,
        "eval_gamma": 0.5,
    }
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1",
        "--run-id",
        "eval1",
        "--seed",
        "11",
        "--extras",
        json.dumps(extras),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    events = result.events
    batches = [e["payload"] for e in events if e["event"] == "eval_batch"]
    assert [b["episodes_done"] for b in batches] == [2, 4, 5]
    assert events[-1]["event"] == "run_completed"
    run_dir = runs_root / "eval1"
    summary = json.loads((run_dir / "eval_summary.json").read_text())
    assert summary["episodes"] == 5 and summary["seed"] == 11 and summary["gamma"] == 0.5
    assert batches[-1]["mean_return"] == pytest.approx(summary["return"]["mean"])
    assert (run_dir / summary["tensorboard_dir"]).is_dir()
    assert all(
        math.isclose(d, cartpole_discounted(n, 0.5)) for d, n in zip(summary["discounted_returns"], summary["lengths"])
    )


def test_corrupt_checkpoint_through_mosaic_run_fails_clearly(mosaic, workdir, runs_root):
    bad = workdir / "bad.cleanrl_model"
    bad.write_bytes(b"not a checkpoint")
    extras = {"mode": "policy_eval", "policy_path": str(bad)}
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1",
        "--run-id",
        "bad1",
        "--extras",
        json.dumps(extras),
        "--quiet",
    )
    assert result.returncode == 2
    failed = result.events[-1]
    assert failed["event"] == "run_failed"
    assert "not a readable .cleanrl_model file" in json.dumps(failed["payload"])
    assert not (runs_root / "bad1" / "eval_summary.json").exists()


def test_sigterm_leaves_a_cancelled_summary(tmp_path, ppo_checkpoint):
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cleanrl_worker.policy_eval",
            "--policy-path",
            str(ppo_checkpoint),
            "--env-id",
            "CartPole-v1",
            "--eval-episodes",
            "100000",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    summary_file = tmp_path / "eval_summary.json"
    try:
        while not summary_file.exists() and proc.poll() is None:  # the first batch is done
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr, stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["status"] == "cancelled" and summary["episodes"] == len(summary["returns"]) >= 1
