"""`mosaic runs`: completed, failed, cancelled, still running, older and damaged manifests."""

import json
import re
import shutil
import time

import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def runs(finished_runs, tmp_path_factory):
    """The session's real runs plus hand-made directories a runs root can hold."""
    workdir = tmp_path_factory.mktemp("runs-cli")
    root = workdir / "runs"
    shutil.copytree(finished_runs.root, root)
    started = {
        "event": "run_started",
        "run_id": "starting",
        "seq": 1,
        "timestamp": time.time() - 7200,
        "payload": {"worker": "cleanrl", "algo": "dqn", "env_id": "Acrobot-v1", "total_timesteps": 500},
    }
    (root / "starting").mkdir()
    (root / "starting" / "config.json").write_text(
        json.dumps(
            {"run_id": "starting", "algo": "dqn", "env_id": "Acrobot-v1", "total_timesteps": 500, "worker": "cleanrl"}
        )
    )
    (root / "starting" / "events.jsonl").write_text(json.dumps(started) + "\n" + '{"event": "metr')  # cut mid-line
    (root / "old").mkdir()
    (root / "old" / "analytics.json").write_text(
        json.dumps(  # an older schema: flat, lists, no metrics
            {
                "schema": "mosaic.analytics/0",
                "status": "completed",
                "algo": "ppo",
                "env_id": "Pong-v5",
                "checkpoints": ["model.pt"],
                "tensorboard": "runs",
            }
        )
    )
    (root / "old" / "config.json").write_text(json.dumps({"run_id": "old", "algo": "ppo", "env_id": "Pong-v5"}))
    (root / "garbled").mkdir()
    (root / "garbled" / "config.json").write_text("{not json")
    (root / "garbled" / "analytics.json").write_text("[1, 2")
    (root / "not-a-run").mkdir()  # no config, no events: ignored
    return workdir, root


def mosaic(workdir, *args):
    return run_cli(list(args), cwd=workdir, env={"MOSAIC_RUNS_DIR": ""})


def test_runs_json_lists_every_run_with_its_status(runs):
    workdir, root = runs
    result = mosaic(workdir, "runs", "--runs-dir", str(root), "--json")
    assert result.returncode == 0, result.stderr
    by_id = {r["run_id"]: r for r in json.loads(result.stdout)}
    assert set(by_id) == {"done", "broken", "stopped", "starting", "old", "garbled"}
    assert {k: by_id[k]["status"] for k in by_id} == {
        "done": "completed",
        "broken": "failed",
        "stopped": "cancelled",
        "starting": "running",
        "old": "completed",
        "garbled": "unknown",
    }
    done = by_id["done"]
    assert done["worker"] == "cleanrl" and done["env_id"] == "CartPole-v1" and done["algo"].endswith("tiny_cleanrl.py")
    assert 1400 <= done["global_step"] < 1500 and done["total_timesteps"] == 1500 and done["last_return"] > 0
    assert done["score"]["source"] == "train" and done["score"]["value"] > 0  # the one score (runstore.score)
    assert 0 < by_id["broken"]["global_step"] <= 600  # it crashed at step 600
    assert by_id["starting"]["algo"] == "dqn" and by_id["starting"]["global_step"] is None
    assert by_id["old"]["manifest_schema"] == "mosaic.analytics/0"
    assert any("config.json: not valid JSON" in p for p in by_id["garbled"]["problems"])


def test_runs_table(runs):
    workdir, root = runs
    result = mosaic(workdir, "runs", "--runs-dir", str(root))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["RUN", "ID", "WORKER", "ALGO", "ENV", "STATUS", "STEPS", "SCORE", "AGE", "DISK"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["done"][1:5] == ["cleanrl", "tiny_cleanrl.py", "CartPole-v1", "completed"]
    assert rows["done"][7] == "train" and float(rows["done"][6]) > 0 and rows["starting"][6] == "-"
    assert rows["done"][5].endswith("/1,500") and rows["starting"][-2] == "2h" and rows["starting"][-1].endswith("K")
    assert rows["stopped"][4] == "cancelled" and rows["broken"][4] == "failed"
    assert "mosaic: run garbled: config.json: not valid JSON" in result.stderr  # one line per damaged run
    warm = mosaic(workdir, "runs", "--runs-dir", str(root))  # from the index's stored cells: the same table
    assert [line.split()[:5] for line in warm.stdout.splitlines()] == [line.split()[:5] for line in lines]
    assert warm.stderr == result.stderr
    moved = run_cli(["runs"], cwd=root.parent.parent, env={"MOSAIC_RUNS_DIR": str(root)})  # no --runs-dir
    assert moved.returncode == 0 and "done" in moved.stdout


def test_runs_show(runs):
    workdir, root = runs
    shown = mosaic(workdir, "runs", "show", "done", "--runs-dir", str(root))
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^status: +completed$", shown.stdout, re.M) and "tiny_cleanrl.cleanrl_model" in shown.stdout
    assert re.search(r"^notes: +baseline run$", shown.stdout, re.M)
    figures = {
        line.split(":")[0]: line.split(":", 1)[1].split()[0]
        for line in shown.stdout.splitlines()
        if line.startswith(("score:", "last episode:", "moving average:"))
    }
    assert set(figures) == {"score", "last episode", "moving average"}  # each named for what it is
    assert all(re.fullmatch(r"-?\d+\.\d\d", value) for value in figures.values()), figures  # 2 decimals
    assert "train, last 10% of steps" in shown.stdout
    detail = json.loads(mosaic(workdir, "runs", "show", "done", "--runs-dir", str(root), "--json").stdout)
    assert detail["manifest"]["status"] == "completed" and detail["config"]["run_id"] == "done"
    old = mosaic(workdir, "runs", "show", "old", "--runs-dir", str(root))
    assert old.returncode == 0 and "model.pt" in old.stdout
    for run_id in ("starting", "garbled"):
        result = mosaic(workdir, "runs", "show", run_id, "--runs-dir", str(root))
        assert result.returncode == 0 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["runs", "show", "dnoe"], "no run 'dnoe' under"),
        (["runs", "show", "../etc"], "is not a run id"),
        (["runs", "show"], "unexpected arguments 'show'"),
        (["runs", "frobnicate", "x"], "unexpected arguments"),
        (["runs", "--runs-dir", "missing-dir"], "no runs directory at missing-dir"),
    ],
)
def test_runs_bad_input(runs, args, message):
    workdir, root = runs
    if "--runs-dir" not in args:
        args = [*args, "--runs-dir", str(root)]
    result = mosaic(workdir, *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    if "dnoe" in args:
        assert "did you mean done" in result.stderr


def test_runs_target_delegates_to_the_daemon_client(runs):
    workdir, _root = runs
    result = mosaic(workdir, "runs", "--target", "127.0.0.1:1")  # nobody listens on port 1
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "127.0.0.1:1" in result.stderr or "daemon client not available" in result.stderr
