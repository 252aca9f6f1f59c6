"""The seeds' XuanCe and RLlib workers (``004``): ``xuance_worker`` and ``ray_worker`` with their
modules (``cli``, ``config``, ``runtime``, ``telemetry``; ``ray_worker.callbacks`` and ``.fastlane``),
importable on the host without XuanCe, Ray or torch; ``python -m <package>.cli --config worker.json``
as the original's daemon spawned them (``--dry-run --emit-summary``, ``--grpc``); and the seeds'
config examples, the original's option names read as ours or refused in one line.

The training processes run in the workers' own environments (``xuance_env``, ``rllib_env``:
tests/conftest.py builds each once per session)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The seeds' configuration examples, verbatim.
XUANCE_EXAMPLE = {"algorithm": "mappo", "learning_rate": 5e-4, "batch_size": 256, "backend": "torch"}
RLLIB_EXAMPLE = {"algorithm": "PPO", "num_workers": 8, "num_envs_per_worker": 4, "framework": "torch"}
FACADES = {
    "xuance_worker": ("cli", "config", "runtime", "telemetry"),
    "ray_worker": ("cli", "config", "runtime", "telemetry", "fastlane"),
}
HEAVY = ("xuance", "ray", "torch", "pettingzoo", "gymnasium", "tensorboard")


def our_form(example: dict) -> dict:
    """A seeds' example as the host's flat parsing reads it: ``algo`` and ``extras.algo_params``."""
    params = {key: value for key, value in example.items() if key != "algorithm"}
    return {"algo": example["algorithm"], "extras": {"algo_params": params}}


def worker_cli(package: str, config: dict, *args: str, cwd: Path, env: dict | None = None, timeout: float = 300):
    """``python -m PACKAGE.cli --config worker.json ARGS`` in ``cwd``, as the original's daemon ran it."""
    (cwd / "worker.json").write_text(json.dumps(config))
    return subprocess.run(
        [sys.executable, "-m", f"{package}.cli", "--config", "worker.json", *args],
        cwd=cwd,
        env={**(env or os.environ), "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def local_cluster_fit(runners: int) -> int:
    """The env runners a run's own Ray cluster starts on this machine: one per usable CPU, at least two."""
    return min(runners, max(2, len(os.sched_getaffinity(0))))


# --------------------------------------------------------------------------- the modules


def test_the_facades_import_on_the_host_without_the_workers_libraries():
    code = f"""
import importlib, importlib.util, json, sys
for package, modules in {FACADES!r}.items():
    for name in modules:
        importlib.import_module(f"{{package}}.{{name}}")
from xuance_worker.config import XuanCeWorkerConfig, load_worker_config
from xuance_worker.runtime import XuanCeRuntimeSummary, XuanCeWorkerRuntime
from ray_worker.config import RayWorkerConfig
from ray_worker.runtime import RayWorkerRuntime
from xuance_worker.telemetry import LifecycleEmitter
from ray_worker.telemetry import LifecycleEmitter as RayEmitter
from xuance_worker.cli import main
assert LifecycleEmitter is RayEmitter and XuanCeWorkerConfig is RayWorkerConfig
callbacks = importlib.util.find_spec("ray_worker.callbacks")  # runs in the env runners: it imports Ray
print(json.dumps({{"heavy": sorted(m for m in {HEAVY!r} if m in sys.modules), "callbacks": callbacks is not None}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"heavy": [], "callbacks": True}


def test_the_originals_extras_exist_and_mosaic_workers_names_the_command_that_builds_each(tmp_path):
    """``pip install -e ".[xuance]"`` / ``".[ray-rllib]"``: the extras exist (pip says nothing of an
    unknown extra) and add nothing to the host's venv; ``mosaic workers`` names the one command."""
    from importlib import metadata

    assert {"xuance", "ray-rllib"} <= set(metadata.metadata("mosaic-rl").get_all("Provides-Extra"))
    extras_of = [r.partition(";")[2].replace("'", '"').replace(" ", "") for r in metadata.requires("mosaic-rl")]
    assert 'extra=="ray"' in extras_of  # the form read here
    assert not {'extra=="xuance"', 'extra=="ray-rllib"'} & set(extras_of)
    env = {**os.environ, "MOSAIC_VENVS": str(tmp_path / "no-venvs")}
    done = subprocess.run(
        [sys.executable, "-m", "mosaic_core.cli.main", "workers", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    status = {item["name"]: item["environment_status"] for item in json.loads(done.stdout)}
    for worker in ("xuance", "rllib"):
        assert status[worker]["state"] == "missing"
        assert status[worker]["detail"] == f"not installed: run `mosaic workers install {worker}`"


# --------------------------------------------------------------------------- refused in one line

BAD = {
    "xuance backend": (
        "xuance_worker",
        {"algo": "mappo", "extras": {"algo_params": {"backend": "tensorflow"}}},
        "extras.algo_params.backend 'tensorflow': the original MOSAIC gave it to XuanCe as its dl_toolbox",
    ),
    "xuance unknown algorithm": ("xuance_worker", {"algo": "mapo"}, "did you mean mappo?"),
    "rllib framework": (
        "ray_worker",
        {"algo": "PPO", "extras": {"algo_params": {"num_workers": 2, "framework": "tf2"}}},
        "extras.algo_params.framework 'tf2': the original MOSAIC passed it to RLlib",
    ),
    "rllib unknown algorithm": ("ray_worker", {"algo": "PPOO"}, "did you mean PPO?"),
    "rllib both names": (
        "ray_worker",
        {"algo": "PPO", "extras": {"algo_params": {"num_workers": 2, "num_env_runners": 1}}},
        "extras.algo_params.num_workers (the original's name of num_env_runners) and .num_env_runners",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_config_is_one_line_and_exit_2(case, tmp_path):
    """Refused before the worker's environment is asked: none is built under this ``$MOSAIC_VENVS``."""
    package, config, words = BAD[case]
    env = {**os.environ, "MOSAIC_VENVS": str(tmp_path / "no-venvs")}
    done = worker_cli(package, config, "--dry-run", "--emit-summary", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert words in line and "worker.json" in line
    assert not (tmp_path / "var").exists()


# --------------------------------------------------------------------------- dry runs


def xuance_summary_holds_the_example(summary: dict) -> None:
    config = summary["config"]
    assert (config["algo"], config["env_id"], config["total_timesteps"]) == ("mappo", "mpe/simple_spread_v3", 1_000_000)
    command = summary["command"]
    assert command[2:4] == ["-m", "xuance_worker.train"]
    assert json.loads(command[command.index("--overrides") + 1]) == {"batch_size": 256, "learning_rate": 5e-4}
    (note,) = summary["notes"]
    assert note.startswith("batch_size 256: XuanCe's mappo derives its minibatch size")


def rllib_summary_holds_the_example(summary: dict) -> None:
    config = summary["config"]
    assert (config["algo"], config["env_id"], config["total_timesteps"]) == ("PPO", "CartPole-v1", 1_000_000)
    command = summary["command"]
    params = json.loads(command[command.index("--params") + 1])
    fit = local_cluster_fit(8)
    assert params == {"num_env_runners": fit, "num_envs_per_env_runner": math.ceil(8 * 4 / fit)}
    assert summary["rllib"]["num_env_runners"] == fit  # as RLlib's own config class reads them
    renamed, *fitted = summary["notes"]
    assert renamed.endswith("num_workers as num_env_runners, num_envs_per_worker as num_envs_per_env_runner")
    assert [note.split(":")[0] for note in fitted] == (["num_env_runners 8"] if fit < 8 else [])


def test_xuance_cli_dry_runs_the_seeds_example(xuance_env, tmp_path):
    done = worker_cli(
        "xuance_worker", our_form(XUANCE_EXAMPLE), "--dry-run", "--emit-summary", cwd=tmp_path, env=xuance_env
    )
    assert done.returncode == 0, done.stderr
    xuance_summary_holds_the_example(json.loads(done.stdout))
    assert not (tmp_path / "var").exists()  # a dry run writes nothing


def test_rllib_cli_dry_runs_the_seeds_example(rllib_env, tmp_path):
    done = worker_cli("ray_worker", our_form(RLLIB_EXAMPLE), "--dry-run", "--emit-summary", cwd=tmp_path, env=rllib_env)
    assert done.returncode == 0, done.stderr
    rllib_summary_holds_the_example(json.loads(done.stdout))
    assert not (tmp_path / "var").exists()


def test_the_seeds_verbatim_examples_dry_run(xuance_env, rllib_env, tmp_path):
    for package, example, holds, env in (
        ("xuance_worker", XUANCE_EXAMPLE, xuance_summary_holds_the_example, xuance_env),
        ("ray_worker", RLLIB_EXAMPLE, rllib_summary_holds_the_example, rllib_env),
    ):
        done = worker_cli(package, example, "--dry-run", "--emit-summary", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        holds(json.loads(done.stdout))


def test_the_python_runtimes_dry_run_through_the_pipeline(xuance_env, rllib_env, tmp_path, monkeypatch):
    from ray_worker.config import load_worker_config as load_rllib
    from ray_worker.runtime import RayWorkerRuntime
    from xuance_worker.config import load_worker_config as load_xuance
    from xuance_worker.runtime import XuanCeRuntimeSummary, XuanCeWorkerRuntime

    monkeypatch.setenv("MOSAIC_VENVS", xuance_env["MOSAIC_VENVS"])
    (tmp_path / "x.json").write_text(json.dumps(our_form(XUANCE_EXAMPLE)))
    summary = XuanCeWorkerRuntime(load_xuance(tmp_path / "x.json"), dry_run=True, runs_dir=tmp_path).run()
    assert isinstance(summary, XuanCeRuntimeSummary)
    assert (summary.status, summary.method, summary.env_id) == ("dry-run", "mappo", "mpe/simple_spread_v3")
    assert (summary.runner_type, summary.mode, summary.analytics_manifest) == ("RunnerMARL", "train", None)
    (tmp_path / "r.json").write_text(json.dumps({**our_form(RLLIB_EXAMPLE), "run_id": "facade-dry"}))
    result = RayWorkerRuntime(load_rllib(tmp_path / "r.json"), dry_run=True, runs_dir=tmp_path).run()
    assert result["status"] == "dry-run" and result["run_dir"] == str(tmp_path / "facade-dry")
    assert result["launch"]["rllib"]["num_env_runners"] == local_cluster_fit(8)
    assert result["extras"] == our_form(RLLIB_EXAMPLE)["extras"]  # the config keeps the names given
    assert not (tmp_path / "facade-dry").exists()


# --------------------------------------------------------------------------- real runs


@pytest.mark.slow  # a XuanCe run of 2,000 steps, started by a daemon
def test_a_daemon_spawning_xuance_as_the_original_did_trains_and_registers(xuance_env, tmp_path, monkeypatch):
    """The daemon starts ``python -m xuance_worker.cli --config <file> --grpc --grpc-target <it>``
    (``original_spawn_daemon.py``) for the seeds' example, four envs, 2,000 steps."""
    from mosaic_core.trainer.store import RunStore
    from tests.trainer.conftest import completed_daemon_run

    monkeypatch.setenv("MOSAIC_VENVS", xuance_env["MOSAIC_VENVS"])
    example = our_form(XUANCE_EXAMPLE)
    example["extras"]["algo_params"].update(parallels=4, vectorize="DummyVecMultiAgentEnv")
    config = {"worker": "xuance", "total_timesteps": 2000, "seed": 1, **example}
    daemon = [sys.executable, str(HERE / "original_spawn_daemon.py")]
    final, events, _log = completed_daemon_run(tmp_path, config, timeout=400, daemon_argv=daemon)
    registration = json.loads(RunStore(tmp_path / "state" / "trainer.sqlite3").get(final.run_id).registration)
    assert (registration["worker_kind"], registration["schema_id"]) == ("xuance", "xuance.mappo")
    assert max(e["payload"]["global_step"] for e in events if e["event"] == "metrics") >= 1800
    recorded = json.loads(Path(final.run_dir, "config.json").read_text())
    assert recorded["extras"]["algo_params"]["backend"] == "torch"  # the run records what was given


@pytest.mark.slow  # an RLlib run of 1,000 env steps on a local Ray cluster
def test_rllib_trains_the_seeds_eight_workers_on_the_cores_it_has(rllib_env, tmp_path):
    example = our_form(RLLIB_EXAMPLE)
    example["extras"]["algo_params"].update(train_batch_size_per_learner=500, minibatch_size=128, num_epochs=2)
    config = {**example, "run_id": "seeds-rllib", "total_timesteps": 1000}
    done = worker_cli("ray_worker", config, "--heartbeat-interval", "1", cwd=tmp_path, env=rllib_env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    run_dir = tmp_path / "var/trainer/runs/seeds-rllib"
    command = json.loads((run_dir / "launch.json").read_text())["command"]
    fit = local_cluster_fit(8)
    assert json.loads(command[command.index("--params") + 1])["num_env_runners"] == fit
    noted = [line for line in done.stderr.splitlines() if line.startswith("mosaic: note: num_env_runners 8")]
    assert len(noted) == (1 if fit < 8 else 0)
    assert max(e["payload"]["global_step"] for e in events if e["event"] == "metrics") >= 1000
