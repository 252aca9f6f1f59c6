"""The smaller things a user hits, each through the CLI."""

from __future__ import annotations

import json


def test_an_unknown_curriculum_preset_is_named_as_such(mosaic):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--total-timesteps",
        "100",
        "--dry-run",
        "--extras",
        '{"curriculum_schedule": "doorky"}',
    )
    assert result.returncode == 2
    assert "extras.curriculum_schedule: unknown preset 'doorky' (presets: babyai_goto, doorkey)" in result.stderr
    assert "missing" not in result.stderr


def test_wandb_going_offline_is_said(mosaic):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "50",
        "--extras",
        '{"track_wandb": true}',
        env={"WANDB_API_KEY": "", "HOME": "/nonexistent"},
    )
    assert result.returncode == 0, result.stderr
    assert "W&B runs offline (no W&B credential" in result.stderr and "wandb sync" in result.stderr


def test_a_typo_in_the_plugin_allow_list_is_named(mosaic):
    warned = mosaic("plugins", "--json", env={"MOSAIC_LOAD_PLUGINS": "fastlan"})
    assert warned.returncode == 0 and "fastlan that no installed plugin has" in warned.stderr
    strict = mosaic("plugins", env={"MOSAIC_LOAD_PLUGINS": "fastlan", "MOSAIC_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2 and "fastlan" in strict.stderr


def test_the_example_plugin_changes_no_one_elses_run(mosaic, runs_root):
    result = mosaic(
        "run",
        "--worker",
        "example",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "50",
        "--run-id",
        "plain",
        "--heartbeat-interval",
        "0.1",
    )
    assert result.returncode == 0
    manifest = json.loads((runs_root / "plain" / "manifest.json").read_text())
    assert "thresh_level" not in manifest and "example" not in manifest
    assert all("thresh_level" not in e["payload"] for e in result.events if e["event"] == "heartbeat")


def test_an_evaluations_episodes_are_not_called_global_steps(mosaic, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from mosaic_analytics.curves import x_label

    assert x_label("eval/episodic_return") == "episode" and x_label("charts/episodic_return") == "global step"
    run = tmp_path / "runs" / "ev1"
    writer = SummaryWriter(str(run / "runs" / "x"))
    for episode in range(5):
        writer.add_scalar("eval/episodic_return", float(episode), episode)
    writer.close()
    result = mosaic(
        "plot",
        "ev1",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--tag",
        "eval/episodic_return",
        "-o",
        str(tmp_path / "eval.png"),
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "eval.png").stat().st_size > 1000


def test_metrics_are_shown_with_sensible_decimals():
    from mosaic_core.runstore.summary import format_number

    assert format_number(-165.34012089086653) == "-165.34" and format_number(500.0) == "500.00"
    assert format_number(0.000123456) == "0.0001235" and format_number(0.0) == "0.00"
    assert format_number(1200) == "1200" and format_number(None) == "-" and format_number(True) == "-"
    assert format_number(float("nan")) == "nan" and format_number(3.14159, 1) == "3.1"
