"""One score, defined once: a run's score is the same number in `mosaic runs --json`, `mosaic runs
show`, `mosaic plot --table`, `mosaic compare` (its rliable export), the dashboard (its run list
and Compare page's data) and `mosaic sweep best` (each seed's value). Three seeds whose returns climb with the step (so the final window, the
last episode and the mean of the last points all differ), one of them with an evaluation of its
final policy (its score is the evaluation's mean). Runs written as a run host writes them:
config.json, events.jsonl, TensorBoard files (tensorboardX), eval.json (mosaic_core.contract)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mosaic_core import contract
from tests.conftest import run_cli

STEPS = range(5, 1001, 5)  # 200 episodes: the last 10% of steps holds 21 of them
EVALUATED = "climb-s2"


def make_run(root: Path, run_id: str, seed: int) -> None:
    from tensorboardX import SummaryWriter

    run_dir = root / run_id
    (run_dir / "logs").mkdir(parents=True)
    config = {
        "run_id": run_id,
        "worker": "cleanrl",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": 1000,
        "seed": seed,
        "extras": {"experiment": "climb"},
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    lines = [
        {"event": "run_started", "run_id": run_id, "seq": 1, "timestamp": 1.0, "payload": {"worker": "cleanrl"}},
        {"event": "run_completed", "run_id": run_id, "seq": 2, "timestamp": 2.0, "payload": {}},
    ]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    writer = SummaryWriter(str(run_dir / "runs" / run_id))
    for step in STEPS:
        writer.add_scalar("charts/episodic_return", 10.0 * seed + step / 10 + (step % 15) / 3, step)
    writer.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-score") / "runs"
    for seed in (1, 2, 3):
        make_run(root, f"climb-s{seed}", seed)
    folder = root / EVALUATED / "evaluations" / "final"
    folder.mkdir(parents=True)
    result = contract.eval_result(
        worker="cleanrl",
        algo="ppo",
        env_id="CartPole-v1",
        checkpoint="checkpoints/step_1000.cleanrl_model",
        global_step=1000,
        returns=[140.0, 150.0, 175.0],
        lengths=[140, 150, 175],
        seeds=[1_000_002, 1_000_003, 1_000_004],
        deterministic=True,
    )
    contract.write_eval(folder / contract.EVAL_FILE, result)
    return root


def test_a_runs_score_is_the_same_in_every_view(root):
    workdir = root.parent
    listed = json.loads(run_cli(["runs", "--runs-dir", str(root), "--json"], cwd=workdir).stdout)
    scores = {r["run_id"]: r["score"]["value"] for r in listed}
    assert sorted(scores) == ["climb-s1", "climb-s2", "climb-s3"]
    assert scores[EVALUATED] == pytest.approx(155.0) and {r["score"]["source"] for r in listed} == {"eval", "train"}
    last_points = [10.0 * 1 + s / 10 + (s % 15) / 3 for s in STEPS][-10:]
    assert scores["climb-s1"] != pytest.approx(sum(last_points) / 10)  # the window, not the last 10 points

    for run_id, value in scores.items():
        shown = run_cli(["runs", "show", run_id, "--runs-dir", str(root)], cwd=workdir)
        line = next(li for li in shown.stdout.splitlines() if li.startswith("score:"))
        assert float(line.split()[1]) == pytest.approx(value, abs=0.005), line

    table = run_cli(["plot", "--runs-dir", str(root), "--group", "seed", "--table", *scores], cwd=workdir)
    assert table.returncode == 0, table.stderr
    row = next(li for li in table.stdout.splitlines() if li.startswith("ppo"))
    mean, _std, low, high = (float(x) for x in re.findall(r"-?\d+\.\d+", row)[:4])
    values = list(scores.values())
    assert (mean, low, high) == pytest.approx((np.mean(values), min(values), max(values)), abs=0.005), row

    compared = run_cli(["compare", "climb", "--runs-dir", str(root), "--reps", "200", "--export", "s.npz"], cwd=workdir)
    assert compared.returncode == 0, compared.stderr
    assert "scores: eval 1, train 2" in compared.stderr
    exported = np.load(workdir / "s.npz")
    assert sorted(exported["ppo CartPole-v1"][:, 0]) == pytest.approx(sorted(values), abs=1e-9)


def test_the_dashboard_shows_the_same_scores(root):
    pytest.importorskip("starlette")
    from tests.dashboard.conftest import TOKENS, http_json, start

    listed = json.loads(run_cli(["runs", "--runs-dir", str(root), "--json"], cwd=root.parent).stdout)
    scores = {r["run_id"]: r["score"]["value"] for r in listed}
    process = start(["serve", "--port", "0", "--runs-dir", str(root)], root.parent, "serve")
    base = f"http://127.0.0.1:{process.ready['port']}"
    TOKENS[base] = process.ready["url"].split("?token=", 1)[1]
    try:
        status, runs = http_json(f"{base}/api/runs")
        assert status == 200, runs
        rows = runs["runs"] if isinstance(runs, dict) else runs
        assert {r["run_id"]: r["score"]["value"] for r in rows} == pytest.approx(scores, abs=1e-9)
        status, groups = http_json(f"{base}/api/groups?runs={','.join(scores)}")
        assert status == 200, groups
        assert sorted(groups["groups"][0]["scores"]) == pytest.approx(sorted(scores.values()), abs=1e-9)
    finally:
        process.stop()
        TOKENS.pop(base, None)


@pytest.mark.slow
def test_sweep_best_gives_each_seeds_run_score(tmp_path):
    """`mosaic sweep best --json`: each seed's value is its run's score as `mosaic runs` shows it."""
    pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")
    from tests.sweep.conftest import sweep, write_spec

    spec = (
        write_spec(tmp_path, extra="")
        .read_text()
        .replace("seeds = 1", "seeds = 2")
        .replace("max_trials = 3", "max_trials = 1")
    )
    (tmp_path / "one.toml").write_text(spec.replace('algo = "ppo"', 'study_name = "one"\nalgo = "ppo"', 1))
    done = sweep(["run", "one.toml"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    best = json.loads(sweep(["best", "one", "--json"], cwd=tmp_path).stdout)
    listed = json.loads(run_cli(["runs", "--json"], cwd=tmp_path).stdout)
    scores = {r["run_id"]: r["score"]["value"] for r in listed}
    assert sorted(best["runs"]) == sorted(scores) and len(scores) == 2
    assert best["seed_values"] == pytest.approx([scores[run] for run in best["runs"]], abs=1e-9)
    assert best["value"] == pytest.approx(np.mean(list(scores.values())), abs=1e-9)
