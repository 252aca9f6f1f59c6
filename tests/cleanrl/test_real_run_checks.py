"""A real run refuses what a dry run refuses, as fast: the env checks run in the host (their
answers cached per installed env packages, so a later run imports no gymnasium), one line, exit 2,
no run directory."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import BIN

CASES = {
    ("ppo", "CartPol-v1"): "env_id 'CartPol-v1' is not a registered environment; did you mean CartPole-v1?",
    ("dqn", "Pendulum-v1"): "dqn needs a discrete action space, not continuous (env Pendulum-v1)",
}


@pytest.mark.parametrize("algo,env_id", list(CASES))
def test_a_real_run_is_refused_like_a_dry_run_and_leaves_nothing(mosaic, runs_root, algo, env_id):
    for attempt in ("first, checked", "second, from the cache"):
        done = mosaic("run", "--worker", "cleanrl", "--algo", algo, "--env-id", env_id, "--total-timesteps", "1000")
        assert done.returncode == 2, (attempt, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mosaic: error: {CASES[algo, env_id]}"), (attempt, lines)
        assert "Traceback" not in done.stderr and not runs_root.exists(), attempt


def test_ppo_on_atari_frames_is_refused_before_anything_starts(mosaic, runs_root):
    pytest.importorskip("ale_py")
    done = mosaic("run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "BreakoutNoFrameskip-v4")
    assert (
        done.returncode == 2 and "ppo takes vector or image (minigrid) observations, not image (atari)" in done.stderr
    )
    assert not runs_root.exists()


def test_once_checked_a_real_run_imports_no_gymnasium_in_the_host(workdir, tmp_path):
    argv = [
        str(BIN / "python"),
        "-X",
        "importtime",
        "-m",
        "mosaic_core.cli.main",
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "Pendulum-v1",
    ]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    again = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    assert first.returncode == again.returncode == 2
    imported = lambda done: {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "gymnasium" in imported(first) and "gymnasium" not in imported(again)
    assert "torch" not in imported(first) | imported(again)
