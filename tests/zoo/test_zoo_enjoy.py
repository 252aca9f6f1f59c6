"""``mosaic enjoy``: a trained run's policy played through the real CLI, as a supervised run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory: PPO on CartPole-v1 for 512 steps through `mosaic run`, with --save-model."""
    from tests.conftest import run_cli

    workdir = tmp_path_factory.mktemp("enjoy")
    result = run_cli(
        [
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--run-id",
            "trained01",
            "--total-timesteps",
            "512",
            "--num-envs",
            "2",
            "--num-steps",
            "128",
            "--save-model",
            "--json",
        ],
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    return workdir / "var" / "trainer" / "runs" / "trained01"


def enjoy(trained: Path, *args: str, env: dict[str, str] | None = None):
    from tests.conftest import run_cli

    return run_cli(["enjoy", *args], cwd=trained.parents[3], env=env)


def evaluations(trained: Path) -> set[Path]:
    return set((trained / "evaluations").glob("eval-*"))


def test_enjoy_a_run_prints_returns_and_writes_a_gif(trained):
    out = trained.parents[3] / "play.gif"
    before = evaluations(trained)
    result = enjoy(trained, "trained", "--episodes", "2", "--video", str(out))
    assert result.returncode == 0, result.stderr
    (where,) = evaluations(trained) - before  # an evaluation of its run, not a new training run
    summary = json.loads((where / "eval.json").read_text())
    assert summary["checkpoint"].endswith("checkpoints/step_512.cleanrl_model") and summary["global_step"] == 512
    assert summary["protocol"]["episodes"] == 2 and summary["worker"] == "cleanrl"
    for index, episode in enumerate(summary["episodes"], start=1):
        assert f"episode {index}: return {episode['return']:.2f}, length {episode['length']}" in result.stdout
    assert "mean return" in result.stdout and str(where / "eval.json") in result.stdout
    with Image.open(out) as gif:
        assert gif.format == "GIF" and gif.n_frames > 1  # an animation (Pillow merges identical frames)
    assert {p.name for p in trained.parent.iterdir()} == {"trained01"}


def test_enjoy_live_publishes_fastlane_frames_from_a_checkpoint_file(trained):
    (checkpoint,) = trained.glob("checkpoints/step_512.cleanrl_model")
    before = evaluations(trained)
    result = enjoy(trained, str(checkpoint), "--episodes", "1", "--live", "--deterministic")
    assert result.returncode == 0, result.stderr
    (where,) = evaluations(trained) - before
    assert f"its live frames: run {where.name}" in result.stderr and "episode 1: return" in result.stdout
    manifest = json.loads((where / "manifest.json").read_text())
    assert manifest["fastlane"]["frames_published"] >= 1 and manifest["status"] == "completed"
    assert json.loads((where / "eval.json").read_text())["protocol"]["deterministic"] is True


def test_enjoy_refuses_bad_input_in_one_line(trained):
    before = evaluations(trained)
    for args, message in (
        (["nope"], "no run 'nope' under"),
        (["trained", "--video", "x.avi"], "give a .gif or .mp4 file name"),
        (["trained", "--episodes", "0"], "--episodes must be at least 1"),
        (["missing/step_1.cleanrl_model"], "no such file or directory"),
    ):
        result = enjoy(trained, *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert evaluations(trained) == before and {p.name for p in trained.parent.iterdir()} == {"trained01"}
