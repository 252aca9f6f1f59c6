"""`mosaic algos`: MOSAIC's 34 documented names, where each comes from and whether it can run here,
computed from what is installed (find_spec, installed versions) and which checkout is named."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from cleanrl_worker.readiness import DOCUMENTED, install_command, missing_extras
from cleanrl_worker.runtime import DEFAULT_ALGO_REGISTRY

FIXTURE_CHECKOUT = Path(__file__).resolve().parents[1] / "atari_mujoco" / "fixture_checkout"
STATES = {"ready", "needs_extra", "needs_checkout", "cannot_run"}


def listed(mosaic, *args):
    result = mosaic("algos", "--json", *args, env={"MOSAIC_CLEANRL_HOME": ""})
    assert result.returncode == 0, result.stderr
    return {a["name"]: a for a in json.loads(result.stdout)["algorithms"]}


def test_every_documented_name_is_listed_with_a_status(mosaic):
    algos = listed(mosaic)
    documented = {name for name, a in algos.items() if a["documented"]}
    assert documented == set(DOCUMENTED) and len(documented) == 34
    assert set(DEFAULT_ALGO_REGISTRY) >= documented
    assert DEFAULT_ALGO_REGISTRY["ppo"] == "cleanrl_worker.algorithms.ppo"
    assert all(a["status"]["state"] in STATES for a in algos.values())
    assert algos["ppo"]["winner"] == "bundled" and algos["ppo"]["status"]["state"] == "ready"
    assert algos["rainbow_atari"]["status"]["state"] == "needs_checkout"
    assert algos["ppo_continuous_action_isaacgym"]["status"]["state"] == "cannot_run"
    assert "Hugging Face hub" in algos["qdagger_dqn_atari_impalacnn"]["status"]["detail"]
    envpool = algos["ppo_atari_envpool"]  # bundled: ready exactly when envpool imports here
    assert envpool["winner"] == "bundled"
    if importlib.util.find_spec("envpool") is None:
        assert envpool["status"]["state"] == "needs_extra"
        assert envpool["status"]["install"].startswith("pip install -e '.[envpool]' torch==")
    else:
        assert envpool["status"]["state"] == "ready"
    assert algos["pqn_atari_envpool"]["status"]["state"] == "cannot_run"  # upstream's, on envpool<0.7's API


def test_a_checkout_turns_needs_checkout_into_ready_or_the_extra_it_lacks(mosaic):
    algos = listed(mosaic, "--cleanrl-home", str(FIXTURE_CHECKOUT))
    dqn_jax = algos["dqn_jax"]
    assert dqn_jax["winner"] == "checkout"
    if missing_extras(("jax",)):
        assert dqn_jax["status"] == {"state": "needs_extra", "detail": "extra jax", "install": install_command(["jax"])}
    else:
        assert dqn_jax["status"]["state"] == "ready"
    assert algos["rainbow_atari"]["status"]["state"] == "needs_checkout"  # not in that checkout


def test_the_table_shows_the_status_column(mosaic):
    result = mosaic("algos", env={"MOSAIC_CLEANRL_HOME": "", "COLUMNS": "250"})
    assert result.returncode == 0, result.stderr
    assert "status" in result.stdout and "cannot run here: needs NVIDIA Isaac Gym" in result.stdout
    assert "ppo_continuous_action_isaacgym" in result.stdout  # documented names show without --all


def test_a_bundled_envpool_run_without_envpool_is_one_line_naming_the_install(mosaic):
    if importlib.util.find_spec("envpool") is not None:
        dry = mosaic(
            "run", "--worker", "cleanrl", "--algo", "ppo_atari_envpool", "--env-id", "Breakout-v5", "--dry-run"
        )
        assert dry.returncode == 0, dry.stderr  # EnvPool's id is checked as gymnasium's ALE/Breakout-v5
        return
    result = mosaic("run", "--worker", "cleanrl", "--algo", "ppo_atari_envpool", "--env-id", "Breakout-v5")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "ppo_atari_envpool runs on EnvPool, which is not installed: pip install -e '.[envpool]'" in result.stderr
