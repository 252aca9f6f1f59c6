"""Validation of the extras the analytics plugin owns (through mosaic_validate_config)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic_analytics import extras, plugin
from mosaic_core.config import build_config
from mosaic_core.errors import ConfigError
from mosaic_core.runs import RunDirectory


def problems(**extra):
    config = build_config(
        {"run_id": "r", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1, "extras": extra}
    )
    return plugin.mosaic_validate_config(config) or []


def test_good_extras_have_no_problem():
    assert (
        problems(
            track_wandb=True,
            wandb_project_name="p",
            wandb_entity="e",
            wandb_run_name="n",
            wandb_api_key="k" * 40,
            wandb_mode="offline",
            tensorboard_dir="tb",
            checkpoints_dir="ckpt/a",
            notes="hi",
            metrics_interval_s=0.5,
        )
        == []
    )


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("tensorboard_dir", "../../etc", "extras.tensorboard_dir: '../../etc' points outside the run directory"),
        ("checkpoints_dir", "/tmp/ckpt", "extras.checkpoints_dir: '/tmp/ckpt' points outside"),
        ("checkpoints_dir", "a/../../b", "points outside"),
        ("checkpoints_dir", "", "must be a non-empty relative path"),
        ("track_wandb", "yes", "extras.track_wandb: must be true or false"),
        ("wandb_project_name", 3, "extras.wandb_project_name: must be a non-empty string"),
        ("wandb_run_name", "a\nb", "extras.wandb_run_name: must be one line"),
        ("wandb_mode", "cloud", "extras.wandb_mode: 'cloud' is not one of online, offline, disabled"),
        ("metrics_interval_s", 0, "extras.metrics_interval_s: must be a number of seconds > 0"),
        ("metrics_interval_s", True, "extras.metrics_interval_s"),
        ("notes", ["a"], "extras.notes: must be a string"),
    ],
)
def test_bad_extras_are_named(key, value, words):
    found = problems(**{key: value})
    assert len(found) == 1 and words in found[0], found


def test_metrics_interval_defaults_and_floor():
    assert extras.metrics_interval({}) == extras.DEFAULT_METRICS_INTERVAL_S
    assert extras.metrics_interval({"metrics_interval_s": 1e-9}) == extras.MIN_METRICS_INTERVAL_S


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", ".", "..", ""]), min_size=1, max_size=6), st.booleans())
def test_escapes_agrees_with_run_directory_inside(tmp_path_factory, parts, absolute):
    """The pre-run check says exactly what RunDirectory.inside decides once the directory exists."""
    path = ("/" if absolute else "") + "/".join(parts)
    directory = RunDirectory(tmp_path_factory.getbasetemp(), "run")
    try:
        directory.inside(path)
        outside = False
    except ConfigError:
        outside = True
    assert extras.escapes(path) == outside, path


def test_the_optuna_keys_are_the_sweep_plugins():
    """The sweep owns its optuna_* keys: it declares, validates and records them, not analytics."""
    from mosaic_sweep import plugin as sweep

    assert not any(str(key).startswith("optuna") for key in plugin.mosaic_extras_keys())
    assert {str(key) for key in sweep.mosaic_extras_keys()} >= {"optuna_*", "optuna_db", "optuna_trial"}
    config = build_config(
        {
            "run_id": "r",
            "algo": "ppo",
            "env_id": "CartPole-v1",
            "total_timesteps": 1,
            "extras": {"optuna_db": "sqlite:////etc/optuna.db", "optuna_trial": -1},
        }
    )
    assert sweep.mosaic_validate_config(config) == [
        "extras.optuna_db: '/etc/optuna.db' points outside the run directory; give a path relative to the run "
        "directory, without '..' (a file path or sqlite:///relative/path.db)",
        "extras.optuna_trial: must be an integer >= 0, got -1",
    ]
