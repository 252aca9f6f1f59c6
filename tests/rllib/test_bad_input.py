"""What the RLlib worker refuses: one line on stderr, exit 2, no traceback, no run directory, no
Ray process started."""

import json
import socket
import subprocess

import pytest

from tests.conftest import worker_bin
from tests.rllib.conftest import refuse, run_args


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nobody listens there once closed


CASES = {
    "unknown algo": ("PP0", "CartPole-v1", {}, {}, "did you mean PPO?"),
    "offline algo": ("CQL", "CartPole-v1", {}, {}, "does not run (offline or model-based)"),
    "unknown key": (
        "PPO",
        "CartPole-v1",
        {"lrr": 1e-3},
        {},
        "extras.algo_params.lrr is not an option of RLlib's PPOConfig; did you mean lr?",
    ),
    "reserved key": ("PPO", "CartPole-v1", {"seed": 3}, {}, "use --seed"),
    "missing env": ("PPO", "CartPol-v1", {}, {}, "did you mean CartPole-v1?"),
    "discrete only": ("DQN", "Pendulum-v1", {}, {}, "DQN needs discrete actions"),
    "top-level key": ("PPO", "CartPole-v1", {}, {"lr": 1e-3}, "RLlib options go under extras.algo_params"),
    "bad mode": ("PPO", "CartPole-v1", {}, {"mode": "play"}, "extras.mode must be one of train, resume, evaluate"),
    "no checkpoint": (
        "PPO",
        "CartPole-v1",
        {},
        {"mode": "resume_training", "checkpoint_path": "/nonexistent"},
        "no RLlib checkpoint at /nonexistent",
    ),
    "evaluate without a checkpoint": (
        "PPO",
        "CartPole-v1",
        {},
        {"mode": "evaluate"},
        "extras.checkpoint_path is required for mode 'evaluate'",
    ),
    "video in training": (
        "PPO",
        "CartPole-v1",
        {},
        {"eval_capture_video": True},
        "extras.eval_capture_video: a video is recorded in mode evaluate only",
    ),
    "zero eval episodes": (
        "PPO",
        "CartPole-v1",
        {},
        {"eval_episodes": 0},
        "extras.eval_episodes must be an integer >= 1, got 0",
    ),
    "dead address": ("PPO", "CartPole-v1", {}, {"ray_address": f"127.0.0.1:{_closed_port()}"}, "does not answer"),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line(case, rllib_env, tmp_path):
    algo, env_id, params, extras, words = CASES[case]
    args = run_args("bad", tmp_path / "runs", algo, params=params, extras=extras, env_id=env_id)
    refuse(args, rllib_env, words, tmp_path / "runs" / "bad")


def test_dry_run_names_the_checked_config(rllib_env, tmp_path):
    done = subprocess.run(
        run_args("dry", tmp_path, params={"lr": 1e-3}, more=("--dry-run", "--emit-summary")),
        env=rllib_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert '"lr": 0.001' in done.stdout and "local Ray cluster" in done.stdout


def test_a_checked_config_is_remembered_in_the_environment_and_a_refused_one_is_not(rllib_env, tmp_path):
    """RLlib's verdict on a config it found no problem with is kept in the worker's environment
    (mosaic_core.ask_environment) and given again without a process that imports RLlib: the
    seeds of an experiment, a resume and a rerun check once. A refused config is asked every time."""
    params = {"lr": 0.000123}  # this test's own config
    python = worker_bin(rllib_env, "rllib") / "python"
    answers = python.parent.parent / "mosaic-answers"

    def mine():  # this test's kept answers (and those it marked, in an earlier session)
        found = answers.glob("*.json") if answers.is_dir() else []
        return [p for p in found if "0.000123" in p.read_text() or '"kept"' in p.read_text()]

    def dry_run(params):
        return subprocess.run(
            run_args("dry", tmp_path, params=params, more=("--dry-run", "--emit-summary")),
            env=rllib_env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    for kept in mine():
        kept.unlink()  # a kept answer of an earlier session
    first = dry_run(params)
    assert first.returncode == 0 and '"kept"' not in first.stdout, first.stderr
    (kept,) = mine()
    answer = json.loads(kept.read_text())
    assert answer["summary"]["lr"] == 0.000123, answer
    answer["summary"]["kept"] = True  # what only the kept answer says
    kept.write_text(json.dumps(answer))
    second = dry_run(params)
    assert second.returncode == 0 and '"kept": true' in second.stdout, second.stderr

    before = sorted(answers.iterdir())
    refused = dry_run({"lrr": 0.000123})
    assert refused.returncode == 2 and "did you mean lr?" in refused.stderr
    assert sorted(answers.iterdir()) == before
