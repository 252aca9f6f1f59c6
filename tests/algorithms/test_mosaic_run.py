"""The bundled algorithms through the real `mosaic run`: checkpoint_saved events and resume_training mode."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import scalars


def events_named(result, name):
    return [e for e in result.events if e["event"] == name]


def test_checkpoints_become_events_and_a_run_resumes_from_one(mosaic, runs_root):
    first = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1000",
        "--run-id",
        "dqn-first",
        "--quiet",
        "--extras",
        json.dumps({"learning_starts": 200, "checkpoint_frequency": 500, "save_model": True, "cuda": False}),
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.events[-1]["event"] == "run_completed"
    saved = [e["payload"] for e in events_named(first, "checkpoint_saved")]
    assert [p["global_step"] for p in saved] == [500, 1000, 1000]
    run_dir = runs_root / "dqn-first"
    for payload in saved:
        assert payload["algo"] == "dqn" and payload["path"].startswith(str(run_dir) + "/")  # absolute: paste it back
        assert Path(payload["path"]).stat().st_size == payload["size_bytes"]
    assert saved[-1]["path"].endswith("/dqn.cleanrl_model")

    second = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1500",
        "--run-id",
        "dqn-resumed",
        "--quiet",
        "--extras",
        json.dumps(
            {"mode": "resume_training", "checkpoint_path": saved[0]["path"], "learning_starts": 100, "cuda": False}
        ),
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.events[-1]["event"] == "run_completed"
    (tb_dir,) = {p.parent for p in (runs_root / "dqn-resumed").rglob("events.out.tfevents.*")}
    # the saved model's closing evaluation logs per episode index (CleanRL's eval/ tags): training tags only
    steps = [step for tag, values in scalars(tb_dir).items() if not tag.startswith("eval/") for step, _ in values]
    assert min(steps) >= 500 and max(steps) < 1500  # TensorBoard continues from the checkpoint's step


def test_resuming_from_another_algorithm_fails_with_the_reason(mosaic, runs_root, ppo_checkpoint):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "2000",
        "--run-id",
        "wrong-algo",
        "--quiet",
        "--extras",
        json.dumps({"mode": "resume_training", "checkpoint_path": str(ppo_checkpoint)}),
    )
    assert result.returncode != 0
    (failed,) = events_named(result, "run_failed")
    assert "saved by algo 'ppo', not 'dqn'" in json.dumps(failed["payload"])
    assert "Traceback" not in result.stderr
    assert not (runs_root / "wrong-algo" / "runs").exists()
