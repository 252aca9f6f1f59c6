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
    result = run_cli(["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--run-id", "trained01",
                      "--total-timesteps", "512", "--num-envs", "2", "--num-steps", "128", "--save-model", "--json"],
                     cwd=workdir)
    assert result.returncode == 0, result.stderr
    return workdir / "var" / "trainer" / "runs" / "trained01"


def enjoy(trained: Path, *args: str):
    from tests.conftest import run_cli

    return run_cli(["enjoy", *args], cwd=trained.parents[3])


def test_enjoy_a_run_prints_returns_and_writes_a_gif(trained):
    out = trained.parents[3] / "play.gif"
    result = enjoy(trained, "trained", "--episodes", "2", "--video", str(out), "--run-id", "play01")
    assert result.returncode == 0, result.stderr
    summary = json.loads((trained.parent / "play01" / "eval_summary.json").read_text())
    # the run's final model or its last checkpoint in the worker's layout (the same weights, saved at the end)
    assert summary["checkpoint"]["path"].endswith(("ppo.cleanrl_model", "checkpoints/step_512.cleanrl_model"))
    assert summary["episodes"] == 2
    for index, (ret, length) in enumerate(zip(summary["returns"], summary["lengths"]), start=1):
        assert f"episode {index}: return {ret:.2f}, length {length}" in result.stdout
    assert "mean return" in result.stdout
    with Image.open(out) as gif:
        assert gif.format == "GIF" and gif.n_frames > 1  # an animation (Pillow merges identical frames)
    events = [json.loads(line) for line in (trained.parent / "play01" / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "run_completed" and [e for e in events if e["event"] == "eval_batch"]


def test_enjoy_live_publishes_fastlane_frames_from_a_checkpoint_file(trained):
    (checkpoint,) = trained.glob("runs/*/ppo.cleanrl_model")
    result = enjoy(trained, str(checkpoint), "--episodes", "1", "--live", "--deterministic", "--run-id", "live01")
    assert result.returncode == 0, result.stderr
    assert "mosaic fastlane watch live01" in result.stderr and "episode 1: return" in result.stdout
    manifest = json.loads((trained.parent / "live01" / "manifest.json").read_text())
    assert manifest["fastlane"]["frames_published"] >= 1 and manifest["status"] == "completed"


def test_enjoy_refuses_bad_input_in_one_line(trained):
    for args, message in ((["nope"], "no run 'nope' under"),
                          (["trained", "--video", "x.avi"], "give a .gif or .mp4 file name"),
                          (["trained", "--episodes", "0"], "--episodes must be an integer >= 1"),
                          (["missing.cleanrl_model"], "no such checkpoint or run directory")):
        result = enjoy(trained, *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert {p.name for p in trained.parent.iterdir()} <= {"trained01", "play01", "live01"}  # no run was left behind
