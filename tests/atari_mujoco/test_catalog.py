"""`mosaic envs`: the env catalog through the real CLI, and the space declarations it shares with dry runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cleanrl_worker.catalog import ALGORITHM_SPACES, fit_problem

from .conftest import MUJOCO_VERSION, clean_environ, mosaic_command

MOSAIC = Path(sys.executable).parent / "mosaic"


def envs_json(tmp_path: Path, *args: str) -> dict:
    proc = subprocess.run(
        [str(MOSAIC), "envs", "--json", *args],
        cwd=tmp_path,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind (MuJoCo writes MUJOCO_LOG.TXT on warnings)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> dict:
    return envs_json(tmp_path_factory.mktemp("catalog"))


def by_id(catalog: dict) -> dict[str, dict]:
    return {entry["env_id"]: entry for entry in catalog["envs"]}


def test_families_say_whether_installed_and_what_installs_them(catalog):
    families = {f["family"]: f for f in catalog["families"]}
    assert set(families) == {"classic_control", "box2d", "mujoco", "atari", "minigrid", "procgen", "dm_control"}
    assert families["classic_control"]["installed"]
    for family, module in (("atari", "ale_py"), ("mujoco", "mujoco"), ("procgen", "procgen"), ("dm_control", "shimmy")):
        assert families[family]["installed"] == (importlib.util.find_spec(module) is not None)
        assert f"'.[{family.replace('_', '-')}]'" in families[family]["install"]


def test_classic_control_envs_list_their_spaces_and_fitting_algorithms(catalog):
    cartpole, pendulum = by_id(catalog)["CartPole-v1"], by_id(catalog)["Pendulum-v1"]
    assert (cartpole["observation"], cartpole["observation_shape"], cartpole["action"], cartpole["action_size"]) == (
        "vector",
        [4],
        "discrete",
        2,
    )
    assert cartpole["algorithms"] == ["ppo", "dqn", "c51"]
    assert pendulum["action"] == "continuous" and "sac_continuous_action" in pendulum["algorithms"]
    assert catalog["algorithms"]["ppo_atari"] == {"actions": ["discrete"], "observations": ["image (atari)"]}


def test_atari_and_mujoco_entries(catalog):
    envs = by_id(catalog)
    breakout, hopper = envs["BreakoutNoFrameskip-v4"], envs[f"Hopper-{MUJOCO_VERSION}"]
    assert breakout["family"] == "atari" and breakout["algorithms"] == ["ppo_atari", "dqn_atari"]
    assert hopper["family"] == "mujoco" and "td3_continuous_action" in hopper["algorithms"]
    if importlib.util.find_spec("ale_py"):
        assert breakout["installed"] and "ALE/Pong-v5" in envs  # ids registered by the installed ale-py
    if importlib.util.find_spec("mujoco"):
        assert hopper["installed"] and hopper["observation_shape"] == [11] and hopper["action_size"] == 3


def test_ids_registered_by_other_packages_appear(catalog):
    assert by_id(catalog)["FrozenLake-v1"]["family"] == "other"  # gymnasium's toy text: no family of ours
    if importlib.util.find_spec("minigrid"):
        assert by_id(catalog)["MiniGrid-DoorKey-5x5-v0"]["algorithms"] == ["ppo"]


def test_one_family_only(tmp_path):
    assert {e["family"] for e in envs_json(tmp_path, "--family", "classic_control")["envs"]} == {"classic_control"}


def test_every_bundled_algorithm_declares_its_spaces():
    bundled = Path(__file__).resolve().parents[2] / "plugins" / "cleanrl_worker" / "algorithms"
    assert set(ALGORITHM_SPACES) == {p.stem for p in bundled.glob("*.py") if p.stem != "__init__"}
    assert (
        fit_problem("ppo_atari", action="discrete", observation="vector", family="classic_control")
        == "ppo_atari takes image (atari) observations, not vector"
    )
    assert (
        fit_problem("sac_continuous_action", action="discrete", observation="vector", family=None)
        == "sac_continuous_action needs a continuous action space, not discrete"
    )
    assert fit_problem("ppo", action="discrete", observation="image", family="minigrid") is None


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed here")
def test_an_env_whose_family_is_missing_stops_with_one_line_naming_the_install(tmp_path):
    proc = subprocess.run(
        mosaic_command("nobox", "ppo", "LunarLander-v2", 1000, {}, "--dry-run"),
        cwd=tmp_path,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "LunarLander-v2 is a Box2D env" in lines[0] and "gymnasium[box2d]" in lines[0], lines
    assert not (tmp_path / "var").exists()


@pytest.mark.parametrize(
    "algo, env_id, message",
    [
        (
            "sac_continuous_action",
            "PongNoFrameskip-v4",
            "sac_continuous_action needs a continuous action space, not discrete",
        ),
        ("ppo_atari", "HalfCheetah-v4", "ppo_atari needs a discrete action space, not continuous"),
        ("ppo", "BreakoutNoFrameskip-v4", "ppo takes vector or image (minigrid) observations, not image (atari)"),
    ],
)
def test_a_dry_run_refuses_a_bundled_algorithm_on_spaces_it_cannot_take(tmp_path, algo, env_id, message):
    proc = subprocess.run(
        mosaic_command("misfit", algo, env_id, 1000, {}, "--dry-run"),
        cwd=tmp_path,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "`mosaic envs` lists what fits" in lines[0] and not (tmp_path / "var").exists()
