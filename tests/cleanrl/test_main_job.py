"""The README's main job, at a small budget: bundled PPO on CartPole through `mosaic run`."""

import json

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def test_main_job_leaves_a_complete_run_directory(mosaic, runs_root):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "3000",
        "--run-id",
        "main-job",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    events = result.events  # stdout is pure JSONL
    assert events[0]["event"] == "run_started" and events[0]["payload"]["algo_source"] == "bundled"
    assert events[-1]["event"] == "run_completed"
    run_dir = runs_root / "main-job"
    config = {**json.loads((run_dir / "config.json").read_text()), **json.loads((run_dir / "launch.json").read_text())}
    assert config["algo"] == "ppo" and config["argv"][:2] == ["--env-id=CartPole-v1", "--total-timesteps=3000"]
    assert (run_dir / "logs" / "cleanrl.stdout.log").exists() and (run_dir / "logs" / "cleanrl.stderr.log").exists()
    assert [json.loads(l) for l in (run_dir / "events.jsonl").read_text().splitlines()] == events
    (event_dir,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(event_dir))
    acc.Reload()
    returns = acc.Scalars("charts/episodic_return")
    assert returns and all(r.value > 0 for r in returns)
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


def test_dry_run_summary_names_everything_without_running(mosaic, workdir):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "3000",
        "--seed",
        "4",
        "--dry-run",
        "--emit-summary",
        "--extras",
        '{"learning_rate": 0.001, "anneal_lr": false, "wandb_api_key": "hush"}',
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["algorithm"]["source"] == "bundled" and summary["algorithm"]["script"].endswith("ppo.py")
    assert summary["algorithm"]["resolution_order"][0] == "script"
    assert summary["argv"][:3] == ["--env-id=CartPole-v1", "--total-timesteps=3000", "--seed=4"]
    assert "--no-anneal-lr" in summary["argv"] and any(a.startswith("--learning-rate=") for a in summary["argv"])
    assert "hush" not in result.stdout
    assert not (workdir / "var").exists()


def test_unknown_flag_is_named_with_a_suggestion(mosaic):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "3000",
        "--extras",
        '{"learning_rat": 0.1}',
    )
    assert result.returncode == 2 and "--learning-rat" in result.stderr and "--learning-rate" in result.stderr
    assert "Traceback" not in result.stderr


def test_worker_cli_module_is_the_seed_interface(workdir, mosaic):
    (workdir / "worker.json").write_text(
        json.dumps(
            {
                "metadata": {
                    "worker": {
                        "config": {
                            "run_id": "seed-iface",
                            "algo": "ppo",
                            "env_id": "CartPole-v1",
                            "total_timesteps": 1000,
                        }
                    }
                }
            }
        )
    )
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cleanrl_worker.cli",
            "--config",
            "worker.json",
            "--dry-run",
            "--emit-summary",
            "--total-timesteps",
            "2000",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["run_id"] == "seed-iface" and "--total-timesteps=2000" in summary["argv"]
    bad = subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.cli", "--config", "worker.json", "--algo", "ppoo", "--dry-run"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "ppo" in bad.stderr and "Traceback" not in bad.stderr
