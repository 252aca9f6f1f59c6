"""manifest.json: sections found in a real run directory, paths always inside it, no secret."""

import json
import os
from pathlib import Path

from mosaic_analytics import plugin
from mosaic_core.config import build_config
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.runstore import artifacts


def make_run(tmp_path, **extras):
    config = build_config(
        {"run_id": "m1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 100, "extras": extras}
    )
    run = RunContext(config, RunDirectory(tmp_path, "m1"), "cleanrl")
    run.directory.create()
    return run


def touch(path: Path, size: int = 8) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return path


def test_sections_from_a_run_directory(tmp_path):
    secret = "S3CRET-" + "x" * 33
    run = make_run(
        tmp_path,
        notes=f"try lr 3e-4 (key {secret} by mistake)",
        optuna_db="sqlite:///study.db",
        checkpoints_dir="ckpt",
        tensorboard_dir="tb",
        wandb_api_key=secret,
    )
    d = run.run_dir
    touch(d / "runs/CartPole__ppo__1__17/events.out.tfevents.17.host.1.0")
    touch(d / "runs/CartPole__ppo__1__17/events.out.tfevents.18.host.1.1")
    touch(d / "tb/events.out.tfevents.19.host.2.0")
    touch(d / "wandb/offline-run-x-abc/files/events.out.tfevents.20.host")  # wandb's copy: not listed
    touch(d / "runs/CartPole__ppo__1__17/ppo.cleanrl_model", 300)  # a worker's suffix: the core knows it from an event
    touch(d / "checkpoints/step_2048.cleanrl_model", 200)  # a worker's layout folder: found by looking
    touch(d / "ckpt/agent_step_4096.pt", 100)
    touch(d / "videos/CartPole__ppo__1__17/rl-video-episode-0.mp4", 50)
    touch(d / "study.db")
    outside = touch(tmp_path / "elsewhere" / "stolen.pt")
    os.symlink(outside, d / "ckpt" / "link.pt")  # a link out of the run dir is never listed
    os.symlink(tmp_path / "elsewhere", d / "linked_dir")
    plugin.mosaic_on_event(
        run, {"event": "checkpoint_saved", "payload": {"path": "ckpt/agent_step_4096.pt", "global_step": 4096}}
    )
    plugin.mosaic_on_event(
        run, {"event": "checkpoint_saved", "payload": {"path": str(d / "ckpt/final.bin"), "global_step": 5000}}
    )
    plugin.mosaic_on_event(
        run, {"event": "checkpoint_saved", "payload": {"path": "../../etc/passwd", "global_step": 1}}
    )
    plugin.mosaic_on_event(
        run,
        {
            "event": "checkpoint_saved",
            "payload": {"path": "runs/CartPole__ppo__1__17/ppo.cleanrl_model", "global_step": 4096},
        },
    )
    sections = plugin.mosaic_build_manifest(run, "completed")
    assert sections["tensorboard"]["event_dirs"] == ["runs/CartPole__ppo__1__17", "tb"]
    assert sections["tensorboard"]["event_files"] == 3 and sections["tensorboard"]["dir"] == "tb"
    files = sections["checkpoints"]["files"]
    assert files == [
        {"path": "checkpoints/step_2048.cleanrl_model", "step": 2048, "size_bytes": 200},
        {"path": "ckpt/agent_step_4096.pt", "step": 4096, "size_bytes": 100},
        {"path": "runs/CartPole__ppo__1__17/ppo.cleanrl_model", "step": 4096, "size_bytes": 300},
        {"path": "ckpt/final.bin", "step": 5000, "size_bytes": None, "missing": True},
    ]
    assert sections["checkpoints"]["dir"] == "ckpt"
    assert sections["videos"]["files"] == [
        {"path": "videos/CartPole__ppo__1__17/rl-video-episode-0.mp4", "size_bytes": 50}
    ]
    from mosaic_sweep import plugin as sweep

    assert "optuna" not in sections  # the sweep plugin's section
    assert sweep.mosaic_build_manifest(run, "completed") == {
        "optuna": {"db": "study.db", "storage": "sqlite:///study.db", "exists": True}
    }
    assert sections["notes"] == "try lr 3e-4 (key *** by mistake)"
    assert sections["metrics"]["source"] == "none"
    assert sections["wandb"]["enabled"] is False and sections["wandb"]["run_id"] == "abc"  # found on disk
    text = json.dumps(sections)
    assert secret not in text and str(tmp_path) not in text  # relative paths only, and no secret


def test_step_from_file_names():
    assert artifacts.step_from_name("agent_step_4096.pt") == 4096
    assert artifacts.step_from_name("ckpt-global_step=12.ckpt") == 12
    assert artifacts.step_from_name("model_300.pth") == 300
    assert artifacts.step_from_name("ppo.cleanrl_model") is None


def test_a_real_run_manifest(finished_runs):
    """The manifest of a real `mosaic run`: sections read back, paths inside the run dir."""
    run_dir = finished_runs.root / "done"
    data = json.loads((run_dir / "manifest.json").read_text())
    assert data["status"] == "completed" and data["notes"] == "baseline run"
    (event_dir,) = data["tensorboard"]["event_dirs"]
    assert event_dir.startswith("runs/CartPole-v1__tiny_cleanrl__1__") and (run_dir / event_dir).is_dir()
    (checkpoint,) = data["checkpoints"]["files"]
    assert checkpoint["path"] == f"{event_dir}/tiny_cleanrl.cleanrl_model"
    assert checkpoint["step"] == 1500 and checkpoint["size_bytes"] == 256
    metrics = data["metrics"]
    assert metrics["source"] == "live" and 1400 <= metrics["global_step"] < 1500 and metrics["episodes"] > 10
    assert metrics["episodic_return"] > 0 and metrics["episodic_return_smoothed"] > 0
    assert metrics["losses"]["value_loss"] > 0 and metrics["sps"] > 0
    last_event_metrics = [e for e in finished_runs.completed.events if e["event"] == "metrics"][-1]["payload"]
    assert {k: metrics[k] for k in last_event_metrics} == last_event_metrics
    for failed in ("broken", "stopped"):
        other = json.loads((finished_runs.root / failed / "manifest.json").read_text())
        assert other["status"] == {"broken": "failed", "stopped": "cancelled"}[failed]
        assert other["metrics"]["source"] == "live" and other["tensorboard"]["event_dirs"]
    assert_paths_inside(data, run_dir)


def assert_paths_inside(data, run_dir: Path):
    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in ("path", "dir", "db", "event_dirs", "logdir"):
            assert not os.path.isabs(value) and ".." not in Path(value).parts, (key, value)
            assert run_dir in (run_dir / value).resolve().parents or (run_dir / value).resolve() == run_dir

    walk(data)
