"""Space compatibility between stages, checked on real gymnasium envs."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from mosaic_core.config import WorkerConfig
from mosaic_curriculum.plugin import mosaic_validate_config
from mosaic_curriculum.schedule import load_schedule
from mosaic_curriculum.spaces import check_stage_spaces, mismatch


def config(schedule, env_id="CartPole-v1"):
    return WorkerConfig(
        run_id="r", algo="ppo", env_id=env_id, total_timesteps=100, extras={"curriculum_schedule": schedule}
    )


def box(shape, dtype=np.float32, low=-1.0):
    return spaces.Box(low, 1.0, shape, dtype)


@pytest.mark.parametrize(
    "a, b",
    [
        (box((4,)), box((4,), low=-5.0)),  # bounds may differ
        (spaces.Discrete(3), spaces.Discrete(3)),
        (
            spaces.Dict({"image": box((7, 7, 3)), "direction": spaces.Discrete(4)}),
            spaces.Dict({"image": box((7, 7, 3)), "direction": spaces.Discrete(4)}),
        ),
        (spaces.Tuple((spaces.Discrete(2), box((1,)))), spaces.Tuple((spaces.Discrete(2), box((1,))))),
        (spaces.MultiDiscrete([2, 3]), spaces.MultiDiscrete([2, 3])),
        (spaces.Text(5), spaces.Text(8)),
    ],
)
def test_compatible_spaces(a, b):
    assert mismatch(a, b) is None


@pytest.mark.parametrize(
    "a, b, reason",
    [
        (box((6,)), box((4,)), "Box(shape=(6,), dtype=float32) vs Box(shape=(4,), dtype=float32)"),
        (box((4,), np.float64), box((4,)), "Box(shape=(4,), dtype=float64) vs Box(shape=(4,), dtype=float32)"),
        (spaces.Discrete(3), spaces.Discrete(2), "Discrete(3) vs Discrete(2)"),
        (spaces.Discrete(2, start=1), spaces.Discrete(2), "Discrete(2, start=1) vs Discrete(2)"),
        (spaces.Discrete(2), box((1,)), "Discrete(2) vs Box(shape=(1,), dtype=float32)"),
        (spaces.MultiDiscrete([2, 3]), spaces.MultiDiscrete([2, 4]), "MultiDiscrete([2, 3]) vs MultiDiscrete([2, 4])"),
        (spaces.MultiBinary(3), spaces.MultiBinary(4), "MultiBinary(3) vs MultiBinary(4)"),
        (
            spaces.Dict({"image": box((7, 7, 3))}),
            spaces.Dict({"image": box((9, 9, 3))}),
            "['image']: Box(shape=(7, 7, 3), dtype=float32) vs Box(shape=(9, 9, 3), dtype=float32)",
        ),
        (spaces.Dict({"a": box((1,))}), spaces.Dict({"b": box((1,))}), "Dict(a) vs Dict(b)"),
        (spaces.Tuple((spaces.Discrete(2),)), spaces.Tuple((spaces.Discrete(3),)), "[0]: Discrete(2) vs Discrete(3)"),
    ],
)
def test_incompatible_spaces_name_the_mismatch(a, b, reason):
    assert mismatch(a, b) == reason


def test_compatible_stages_pass():
    assert check_stage_spaces(load_schedule([{"env_id": "CartPole-v1", "steps": 5}, {"env_id": "CartPole-v0"}])) == []


def test_incompatible_stages_are_named_with_both_spaces():
    schedule = load_schedule(
        [{"env_id": "CartPole-v1", "steps": 5}, {"env_id": "CartPole-v0", "steps": 5}, {"env_id": "Acrobot-v1"}]
    )
    assert check_stage_spaces(schedule) == [
        "extras.curriculum_schedule[2] (Acrobot-v1): observation space differs from stage 0 (CartPole-v1): "
        "Box(shape=(6,), dtype=float32) vs Box(shape=(4,), dtype=float32)",
        "extras.curriculum_schedule[2] (Acrobot-v1): action space differs from stage 0 (CartPole-v1): "
        "Discrete(3) vs Discrete(2)",
    ]


def test_an_env_that_cannot_be_made_is_named():
    problems = check_stage_spaces(load_schedule([{"env_id": "CartPole-v1", "steps": 5}, {"env_id": "NoSuchEnv-v9"}]))
    assert len(problems) == 1
    assert problems[0].startswith("extras.curriculum_schedule[1].env_id: cannot make 'NoSuchEnv-v9': ")
    assert "\n" not in problems[0]


def test_validate_config_hook():
    assert mosaic_validate_config(WorkerConfig(run_id="r", algo="ppo", env_id="CartPole-v1", total_timesteps=1)) is None
    assert mosaic_validate_config(config([{"env_id": "CartPole-v1", "steps": 9}, {"env_id": "CartPole-v0"}])) == []
    assert mosaic_validate_config(config([])) == [
        "extras.curriculum_schedule: the list of stages is empty; give at least one stage"
    ]
    assert mosaic_validate_config(config([{"env_id": "CartPole-v0"}])) == [
        "env_id 'CartPole-v1' differs from the first stage of extras.curriculum_schedule ('CartPole-v0'): "
        "the script starts on the first stage, so use --env-id CartPole-v0"
    ]


@pytest.mark.parametrize("preset", ["doorkey", "babyai_goto"])
def test_presets_have_compatible_stages(preset):
    pytest.importorskip("minigrid")
    first = load_schedule(preset).stages[0].env_id
    assert mosaic_validate_config(config(preset, env_id=first)) == []
