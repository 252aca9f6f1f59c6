"""Evaluation during training (eval_frequency / eval_episodes) through the real `mosaic run`:
TensorBoard read back, metrics and checkpoint_saved events, eval_history.json, the manifest's
evaluation section, and the best model replayed by policy_eval mode with the same episodes."""

from __future__ import annotations

import json

import pytest

from cleanrl_worker.checkpoint import load_checkpoint

from .conftest import run_ok, scalars

CASES = {  # algo: (extras, eval every N steps, total steps)
    "ppo": ({"num_envs": 2, "num_steps": 128}, 512, 2048),
    "dqn": ({"learning_starts": 200, "target_network_frequency": 100}, 500, 1500),
}


def events_named(result, name):
    return [e["payload"] for e in result.events if e["event"] == name]


@pytest.mark.parametrize("algo", sorted(CASES))
def test_evaluation_during_training_keeps_the_best_model(mosaic, runs_root, algo):
    extras, every, total = CASES[algo]
    run_id = f"{algo}-periodic"
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        algo,
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        str(total),
        "--run-id",
        run_id,
        "--quiet",
        "--extras",
        json.dumps({**extras, "eval_frequency": every, "eval_episodes": 3, "cuda": False}),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.events[-1]["event"] == "run_completed"
    run_dir = runs_root / run_id

    # TensorBoard: eval/mean_return at each multiple of the frequency, as the history records it
    (history_path,) = run_dir.glob("runs/*/eval_history.json")
    history = json.loads(history_path.read_text())
    curve = scalars(history_path.parent)["eval/mean_return"]
    assert [step for step, _ in curve] == list(range(every, total + 1, every))
    evaluations = history["evaluations"]
    assert [e["global_step"] for e in evaluations] == [step for step, _ in curve]
    assert [e["mean_return"] for e in evaluations] == pytest.approx([value for _, value in curve])
    assert all(len(e["returns"]) == 3 for e in evaluations) and history["deterministic"] is True
    best = max(evaluations, key=lambda e: e["mean_return"])  # the first of equals stays the best
    assert (history["best"]["global_step"], history["best"]["mean_return"]) == (
        best["global_step"],
        best["mean_return"],
    )

    # the same figure in the metrics events, through the metric bridge
    last_scalars = [p["scalars"] for p in events_named(result, "metrics") if "eval/mean_return" in p.get("scalars", {})]
    assert last_scalars and last_scalars[-1]["eval/mean_return"] == pytest.approx(evaluations[-1]["mean_return"])

    # one checkpoint_saved per new best, the last one naming the best evaluation
    saved = [p for p in events_named(result, "checkpoint_saved") if p["path"].endswith("/best.cleanrl_model")]
    improvements = [
        e
        for i, e in enumerate(evaluations)
        if all(e["mean_return"] > earlier["mean_return"] for earlier in evaluations[:i])
    ]
    assert [p["global_step"] for p in saved] == [e["global_step"] for e in improvements]
    assert saved[-1]["evaluation"]["mean_return"] == best["mean_return"]
    best_file = run_dir / saved[-1]["path"]
    ckpt = load_checkpoint(best_file)
    assert ckpt["global_step"] == best["global_step"] and ckpt["evaluation"]["seed"] == history["seed"]

    # the manifest's evaluation section
    manifest = json.loads((run_dir / "manifest.json").read_text())["evaluation"]["periodic"]
    assert manifest["evaluations"] == len(evaluations) and manifest["eval_frequency"] == every
    assert manifest["best"]["mean_return"] == best["mean_return"]
    assert (run_dir / manifest["best_model"]).resolve() == best_file.resolve()
    assert manifest["history"] == str(history_path.relative_to(run_dir))

    # policy_eval replays the best model on the evaluation's own seeds: the same returns
    replay = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--env-id",
        "CartPole-v1",
        "--seed",
        str(history["seed"]),
        "--run-id",
        f"{algo}-best-replay",
        "--quiet",
        "--extras",
        json.dumps(
            {
                "mode": "policy_eval",
                "policy_path": str(best_file),
                "eval_episodes": 3,
                "eval_batch_size": 3,
                "eval_deterministic": True,
            }
        ),
    )
    assert replay.returncode == 0, replay.stderr[-3000:]
    summary = json.loads((runs_root / f"{algo}-best-replay" / "eval_summary.json").read_text())
    assert summary["returns"] == best["returns"]
    assert summary["checkpoint"]["evaluation"]["mean_return"] == best["mean_return"]


def test_evaluation_does_not_change_training(tmp_path):
    flags = ["--env-id", "CartPole-v1", "--total-timesteps", "1536", "--num-envs", "2", "--num-steps", "128"]
    plain = scalars(run_ok("ppo", *flags, cwd=tmp_path / "plain").run_dir)
    evaluated = scalars(run_ok("ppo", *flags, "--eval-frequency", "256", cwd=tmp_path / "evaluated").run_dir)
    for tag in ("charts/episodic_return", "losses/value_loss", "losses/policy_loss", "losses/approx_kl"):
        assert evaluated[tag] == plain[tag], tag
    assert len(evaluated["eval/mean_return"]) == 6 and "eval/mean_return" not in plain
