"""A dry run checks the environment: the id exists (or its family's extra is named) and every
bundled algorithm fits its spaces, read without stepping the env; one line when it does not."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

ENVS = {
    "discrete": "CartPole-v1",
    "continuous": "Pendulum-v1",
    "minigrid image": "MiniGrid-Empty-5x5-v0",
    "atari image": "BreakoutNoFrameskip-v4",
}
FITS = {
    "ppo": {"discrete", "minigrid image"},
    "dqn": {"discrete"},
    "c51": {"discrete"},
    "ppo_atari": {"atari image"},
    "dqn_atari": {"atari image"},
    "ppo_continuous_action": {"continuous"},
    "sac_continuous_action": {"continuous"},
    "td3_continuous_action": {"continuous"},
    "ddpg_continuous_action": {"continuous"},
}
ATARI = importlib.util.find_spec("ale_py") is not None


@pytest.mark.parametrize("kind", list(ENVS))
@pytest.mark.parametrize("algo", list(FITS))
def test_every_bundled_algorithm_on_each_kind_of_env(mosaic, algo, kind):
    if kind == "atari image" and not ATARI:
        pytest.skip("the atari extra is not installed")
    result = mosaic(
        "run", "--worker", "cleanrl", "--algo", algo, "--env-id", ENVS[kind], "--total-timesteps", "100", "--dry-run"
    )
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    if kind in FITS[algo]:
        assert result.returncode == 0 and lines[0].startswith("dry run ok"), lines
    else:
        assert result.returncode == 2 and algo in lines[0] and ENVS[kind] in lines[0], lines


def test_unknown_and_uninstalled_envs(mosaic):
    typo = mosaic("run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPol-v1", "--dry-run")
    assert typo.returncode == 2 and "not a registered environment; did you mean CartPole-v1?" in typo.stderr
    evaluation = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--env-id",
        "NoSuchEnv-v0",
        "--dry-run",
        "--extras",
        '{"mode": "policy_eval", "policy_path": "/etc/hostname"}',
    )
    assert evaluation.returncode == 2 and "NoSuchEnv-v0" in evaluation.stderr


def test_a_script_without_declared_spaces_says_they_were_not_checked(mosaic, workdir):
    (workdir / "mine.py").write_text(
        "from dataclasses import dataclass\n\n@dataclass\nclass Args:\n"
        "    env_id: str = 'CartPole-v1'\n    total_timesteps: int = 10\n"
    )
    result = mosaic(
        "run", "--worker", "cleanrl", "--algo", "mine.py", "--env-id", "Pendulum-v1", "--dry-run", "--emit-summary"
    )
    assert result.returncode == 0, result.stderr
    assert "spaces not checked: mine" in json.loads(result.stdout)["env_check"]
    own = mosaic(
        "run", "--worker", "cleanrl", "--algo", "mine.py", "--env-id", "MyOwn-v0", "--dry-run", "--emit-summary"
    )  # a script may register its own env ids when it runs
    assert own.returncode == 0 and "may register it itself" in json.loads(own.stdout)["env_check"]


def test_a_dry_run_imports_no_torch_tensorboard_or_wandb(workdir):
    code = (
        "import sys\nfrom mosaic_core.cli.main import main\n"
        "code = main(['run', '--worker', 'cleanrl', '--algo', 'ppo', '--env-id', 'MiniGrid-Empty-5x5-v0', "
        "'--dry-run'])\n"
        "print(code, sorted(m for m in ('torch', 'tensorboard', 'wandb', 'matplotlib', 'tensorboardX') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "0 []", result.stderr
