"""Knowledge lives with its owner: a worker declares its events, its code paths and the
settings it honours; the host declares its own events; plugins publish typed settings, never
another worker's flags. Through the real CLI, the example worker (not CleanRL) and real runs."""

from __future__ import annotations

import json

from mosaic_core.config import build_config
from mosaic_core.runs import RunContext, RunDirectory

EXAMPLE = ["run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "300"]


def test_a_worker_that_cannot_track_refuses_track_wandb_and_never_receives_track(mosaic, workdir):
    refused = mosaic(*EXAMPLE, "--extras", json.dumps({"track_wandb": True, "wandb_project_name": "p"}))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "mosaic: error: extras.track_wandb: worker 'example' cannot honour TrackingSettings (published by plugin "
        "'analytics'); leave it out for this worker (field 'extras.track_wandb')"
    ]
    assert list(workdir.iterdir()) == []  # nothing was created
    untracked = mosaic(*EXAMPLE, "--dry-run", "--emit-summary", "--extras", json.dumps({"track_wandb": False}))
    assert untracked.returncode == 0, untracked.stderr
    summary = json.loads(untracked.stdout)
    assert summary["plugin_args"] == [] and not any("track" in arg for arg in summary["command"])
    # The CleanRL worker honours the same settings with its own flags.
    cleanrl = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--dry-run",
        "--emit-summary",
        "--extras",
        json.dumps({"track_wandb": True, "wandb_entity": "lab"}),
    )
    assert cleanrl.returncode == 0, cleanrl.stderr
    argv = json.loads(cleanrl.stdout)["argv"]
    assert "--track" in argv and "--wandb-entity=lab" in argv and json.loads(cleanrl.stdout)["plugin_args"] == []


def test_checkpoint_saved_is_a_host_event_that_survives_disabling_the_cleanrl_plugin(mosaic, runs_root):
    result = mosaic(*EXAMPLE, "--run-id", "ck", "--json", env={"MOSAIC_DISABLE_PLUGINS": "cleanrl"})
    assert result.returncode == 0, result.stderr
    saved = [e["payload"]["path"] for e in result.events if e["event"] == "checkpoint_saved"]
    # the run contract's checkpoint at the end, then the policy the example keeps as its model
    assert saved == [str(runs_root / "ck" / "checkpoints" / "step_300.json"), str(runs_root / "ck" / "policy.json")]
    logged = [json.loads(line) for line in (runs_root / "ck" / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in logged].count("checkpoint_saved") == 2
    manifest = json.loads((runs_root / "ck" / "manifest.json").read_text())
    assert [(f["path"], f["step"]) for f in manifest["checkpoints"]["files"]] == [
        ("checkpoints/step_300.json", 300),
        ("policy.json", 300),
    ]
    assert "cleanrl" not in manifest["plugins"]["active"]
    assert "undeclared" not in result.stderr and "dropped" not in result.stderr


def test_an_undeclared_child_event_is_warned_about_once_naming_it_and_the_worker(mosaic, runs_root, tmp_path):
    policy = tmp_path / "chatty.py"
    policy.write_text(
        "from mosaic_core.child import emit_event\nCALLS = [0]\n\n"
        "def act(observation, action_space):\n    CALLS[0] += 1\n"
        "    if CALLS[0] <= 3:\n        emit_event('surprise', {'call': CALLS[0]})\n    return 0\n"
    )
    result = mosaic(*EXAMPLE, "--algo", str(policy), "--run-id", "ch", "--json")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "surprise" in line]
    assert warnings == [
        "mosaic: warning: worker 'example' emitted child event 'surprise': neither the host, a plugin "
        "(mosaic_child_events) nor the worker (Worker.child_events) declared it; it is dropped"
    ]
    assert "surprise" not in (runs_root / "ch" / "events.jsonl").read_text()


def test_the_cleanrl_worker_s_run_hooks_leave_other_workers_runs_alone(tmp_path, monkeypatch):
    """Its run hooks (WorkerMetadata.run_hooks) are registered for CleanRL runs only: no hook
    body asks which worker a run has, and an example run never reaches them."""
    from mosaic_core.plugins import load_plugin_host

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    config = build_config({"run_id": "r1", "algo": "random", "env_id": "HalfCheetah-v4", "total_timesteps": 10})
    directory = RunDirectory(tmp_path, "r1")
    directory.create()
    (directory.path / "eval_summary.json").write_text(json.dumps({"status": "completed", "episodes": 1}))
    host = load_plugin_host()
    other, own = RunContext(config, directory, "example"), RunContext(config, directory, "cleanrl")
    assert "evaluation" not in host.build_manifest(other, "completed") and "MUJOCO_GL" not in host.child_env(other)
    assert host.build_manifest(own, "completed")["evaluation"]["status"] == "completed"
    assert host.child_env(own)["MUJOCO_GL"] == "egl"
    assert "mosaic_build_manifest" in host.hooks_of("worker:cleanrl") and not host.hooks_of("cleanrl").count(
        "mosaic_build_manifest"
    )
