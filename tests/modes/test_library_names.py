"""MOSAIC's documented curriculum and evaluation names (mosaic_curriculum.tasks: presets and task
wrappers; cleanrl_worker.wrappers.curriculum: the worker's runs), used as a library: real MiniGrid
envs, real supervised runs through the worker's pipeline."""

from __future__ import annotations

import json

import pytest

from cleanrl_worker.config import parse_worker_config
from cleanrl_worker.wrappers import curriculum
from mosaic_curriculum import tasks
from mosaic_curriculum.schedule import PRESETS

pytest.importorskip("minigrid")


def test_presets_are_the_curriculum_plugins_and_import_where_mosaic_s_users_import_them():
    assert tasks.BABYAI_GOTO_CURRICULUM == PRESETS["babyai_goto"]
    from cleanrl_worker.wrappers.curriculum import BABYAI_DOORKEY_CURRICULUM, BABYAI_GOTO_CURRICULUM

    assert BABYAI_GOTO_CURRICULUM == PRESETS["babyai_goto"] and BABYAI_DOORKEY_CURRICULUM == PRESETS["doorkey"]
    BABYAI_GOTO_CURRICULUM.clear()  # a copy: the plugin's presets are untouched
    assert curriculum.BABYAI_GOTO_CURRICULUM == PRESETS["babyai_goto"] != []
    assert [s["env_id"] for s in tasks.BABYAI_DOORKEY_CURRICULUM] == [
        "MiniGrid-DoorKey-5x5-v0",
        "MiniGrid-DoorKey-6x6-v0",
        "MiniGrid-DoorKey-8x8-v0",
        "MiniGrid-DoorKey-16x16-v0",
    ]


def test_babyai_task_wrapper_switches_envs_at_run_time():
    env = tasks.BabyAITaskWrapper(["BabyAI-GoToRedBallNoDists-v0", "BabyAI-GoToObj-v0"])
    assert isinstance(env, tasks.ReinitTaskWrapper) and env.env_id == "BabyAI-GoToRedBallNoDists-v0"
    first = env.unwrapped
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    obs, _ = env.reset(new_task=1, seed=2)
    assert env.env_id == "BabyAI-GoToObj-v0" and env.unwrapped is not first
    assert env.unwrapped.spec.id == "BabyAI-GoToObj-v0" and env.observation_space.contains(obs)
    obs, reward, *_ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="not in the task space"):
        env.change_task(5)
    env.close()


def test_babyai_task_wrapper_refuses_an_unknown_env_id():
    with pytest.raises(Exception, match="No-Such-Env-v0"):
        tasks.BabyAITaskWrapper(["BabyAI-GoToObj-v0", "No-Such-Env-v0"])


@pytest.mark.slow
def test_run_curriculum_training_goes_through_the_stages(tmp_path):
    config = parse_worker_config(
        {
            "run_id": "cur1",
            "algo": "ppo",
            "env_id": "MiniGrid-Empty-5x5-v0",
            "total_timesteps": 1024,
            "extras": {"num_envs": 2, "num_steps": 128, "cuda": False},
        }
    )
    schedule = [{"env_id": "MiniGrid-Empty-5x5-v0", "until": "steps>=256"}, {"env_id": "MiniGrid-Empty-6x6-v0"}]
    summary = curriculum.run_curriculum_training(config, schedule, runs_dir=tmp_path)
    assert summary["status"] == "completed"
    manifest = json.loads((tmp_path / "cur1" / "manifest.json").read_text())["curriculum"]
    assert [s["env_id"] for s in manifest["stages"]] == ["MiniGrid-Empty-5x5-v0", "MiniGrid-Empty-6x6-v0"]
    assert manifest["stage"] == 1


def test_run_batched_evaluation_evaluates_a_checkpoint(tmp_path, ppo_checkpoint):
    config = parse_worker_config({"run_id": "ev1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1})
    summary = curriculum.run_batched_evaluation(config, ppo_checkpoint, episodes=4, batch_size=2, runs_dir=tmp_path)
    assert summary["status"] == "completed" and summary["extras"]["mode"] == "evaluate"  # normalised by the core
    result = json.loads((tmp_path / "ev1" / "eval_summary.json").read_text())
    assert result["episodes"] == 4 and len(result["returns"]) == 4 and result["batch_size"] == 2
