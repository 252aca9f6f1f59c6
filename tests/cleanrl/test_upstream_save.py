"""Upstream's save path under MOSAIC's default save. The fixture checkout's dqn saves its model as
upstream's scripts do and then runs ``cleanrl_utils.evals``' 10-episode evaluation with video
(``make_env`` with ``capture_video=True``: ``RecordVideo``, moviepy). The default save keeps the
model and leaves that evaluation out; a ``--save-model`` the user gives runs it, video included, and
its episodes are the run's evaluation: ``evaluations/upstream-save-STEP/eval.json`` (``mosaic.eval/1``,
marked as upstream's own unseeded episodes), the run's score, its model card."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cleanrl_worker import registry, upstream_eval

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "cleanrl_checkout"


def train(mosaic, runs_root, run_id, **extras):
    train_events(mosaic, run_id, **extras)
    return runs_root / run_id


def train_events(mosaic, run_id, **extras):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "300",
        "--run-id",
        run_id,
        "--quiet",
        "--extras",
        json.dumps({"learning_starts": 50, **extras}),
        env={registry.HOME_VAR: str(CHECKOUT)},
    )
    assert result.events[-1]["event"] == "run_completed", (result.events[-1:], result.stderr[-2000:])
    return result.events


def saved_model(run_dir: Path) -> Path:
    models = list((run_dir / "runs").glob("CartPole-v1__dqn__1__*/dqn.cleanrl_model"))
    assert len(models) == 1, list(run_dir.rglob("*"))
    assert np.load(models[0]).shape == (5, 2)  # the linear Q-function: 4 observations + bias, 2 actions
    return models[0]


def eval_returns(model: Path) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(model.parent))
    accumulator.Reload()
    if "eval/episodic_return" not in accumulator.Tags()["scalars"]:
        return []
    return [event.value for event in accumulator.Scalars("eval/episodic_return")]


def test_the_default_save_keeps_the_model_and_leaves_upstreams_evaluation_out(mosaic, runs_root):
    run_dir = train(mosaic, runs_root, "default-save")
    model = saved_model(run_dir)
    assert eval_returns(model) == [] and not (run_dir / "videos").exists()
    stderr = (run_dir / "logs" / "cleanrl.stderr.log").read_text()
    assert f"upstream's evaluation of runs/{model.parent.name}/dqn.cleanrl_model left out" in stderr


def test_a_save_the_user_asks_for_runs_upstreams_evaluation_with_video(mosaic, runs_root):
    events = train_events(mosaic, "asked-save", save_model=True)
    run_dir = runs_root / "asked-save"
    model = saved_model(run_dir)
    returns = eval_returns(model)
    assert len(returns) == 10
    videos = list((run_dir / "videos" / f"{model.parent.name}-eval").glob("*.mp4"))
    assert videos and all(video.stat().st_size > 0 for video in videos)
    # the run's evaluation, where `mosaic evaluate` keeps its own: what TensorBoard holds, read back
    (found,) = (run_dir / "evaluations").glob("upstream-save-*/eval.json")
    evaluation = json.loads(found.read_text())
    assert found.parent.name == "upstream-save-299"  # the script's last global_step
    assert evaluation["schema"] == "mosaic.eval/1" and evaluation["global_step"] == 299
    assert [e["return"] for e in evaluation["episodes"]] == pytest.approx(returns)
    assert evaluation["mean"] == pytest.approx(float(np.mean(returns)))
    assert all(1 <= e["length"] <= 500 for e in evaluation["episodes"])
    assert evaluation["checkpoint"] == str(model) and evaluation["algo"] == "dqn"
    # honest about its protocol: upstream's unseeded episodes, sampled (ε-greedy) actions
    assert evaluation["protocol"] == {
        "episodes": 10,
        "deterministic": False,
        "first_seed": None,
        "normalization": "frozen",
    }
    assert [e["seed"] for e in evaluation["episodes"]] == [None] * 10
    assert evaluation["evaluated_by"] == "upstream cleanrl_utils.evals.dqn_eval after --save-model"
    assert "not the run contract's evaluation seeds" in evaluation["seeds"]
    announced = [e["payload"] for e in events if e["event"] == "eval_result"]
    assert [a["mean"] for a in announced] == [evaluation["mean"]] and announced[0]["path"] == str(found)
    notes = [e["payload"]["text"] for e in events if e["event"] == "note"]
    assert any("not the run contract's evaluation seeds" in note and str(found) in note for note in notes), notes
    # it counts as the run's evaluation: the score `mosaic runs` shows
    listed = json.loads(mosaic("runs", "--runs-dir", str(runs_root), "--json").stdout)
    (row,) = [r for r in listed if r["run_id"] == "asked-save"]
    assert row["score"]["source"] == "eval" and row["score"]["value"] == pytest.approx(evaluation["mean"])


def dry_run_command(mosaic, *flags, checkout=True, **extras):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "dqn",
        "--env-id",
        "CartPole-v1",
        "--dry-run",
        "--emit-summary",
        *flags,
        "--extras",
        json.dumps(extras),
        env={registry.HOME_VAR: str(CHECKOUT)} if checkout else None,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    skipped = (
        summary["command"][summary["command"].index("--skip-eval-of") + 1]
        if "--skip-eval-of" in summary["command"]
        else None
    )
    if skipped:
        assert upstream_eval.dry_run_note(skipped) in summary["notes"]
    return skipped


def test_only_a_default_save_of_an_upstream_script_leaves_its_evaluation_out(mosaic):
    assert dry_run_command(mosaic) == "dqn.cleanrl_model"
    assert dry_run_command(mosaic, exp_name="mine") == "mine.cleanrl_model"  # runs/<run>/{exp_name}.cleanrl_model
    assert dry_run_command(mosaic, save_model=True) is None
    assert dry_run_command(mosaic, "--no-save") is None
    assert dry_run_command(mosaic, checkout=False) is None  # the bundled dqn: a save path of our own
    upstream = registry.resolve("dqn", cleanrl_home=str(CHECKOUT), cwd=CHECKOUT)
    assert upstream_eval.skipped_model(upstream, ["--upload-model"], ["--save-model"]) is None  # upstream's save path


EVALS = """
def evaluate(model_path, make_env, env_id, eval_episodes, run_name, Model, **kwargs):
    return [str(model_path)]
"""


@pytest.mark.parametrize(
    "model_path, returns",
    [
        ("runs/CartPole-v1__dqn__1__1/dqn.cleanrl_model", []),  # the final model: left out
        (
            "runs/CartPole-v1__dqn__1__1/dqn-offline-100000.cleanrl_model",
            ["runs/CartPole-v1__dqn__1__1/dqn-offline-100000.cleanrl_model"],
        ),
        ("teacher/q_network.pth", ["teacher/q_network.pth"]),  # QDagger's teacher
    ],
)
def test_only_the_final_models_evaluation_is_left_out(tmp_path, model_path, returns):
    evals = tmp_path / "cleanrl_utils" / "evals"
    evals.mkdir(parents=True)
    (tmp_path / "cleanrl_utils" / "__init__.py").write_text("")
    (evals / "__init__.py").write_text("")
    (evals / "dqn_eval.py").write_text(EVALS)
    program = (
        "import json, sys; from cleanrl_worker import upstream_eval; upstream_eval.install('dqn.cleanrl_model');"
        f"sys.path.insert(0, {str(tmp_path)!r}); from cleanrl_utils.evals.dqn_eval import evaluate;"
        f"print(json.dumps(evaluate({model_path!r}, None, 'CartPole-v1', 10, 'run', None)))"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == returns
    assert ("left out" in done.stderr) == (not returns)
