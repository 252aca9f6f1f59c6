"""MOSAIC's documented Python facade of the CleanRL worker: every name imports and behaves as
documented, as a thin layer over the one pipeline."""

from __future__ import annotations

import io
import json
import time

import pytest

from cleanrl_worker import get_worker_metadata
from cleanrl_worker.analytics import build_manifest
from cleanrl_worker.config import (
    CleanRLWorkerConfig,
    WorkerConfig,
    load_worker_config,
    load_worker_config_from_string,
    parse_worker_config,
)
from cleanrl_worker.runtime import DEFAULT_ALGO_REGISTRY, CleanRLWorkerRuntime, RuntimeSummary
from cleanrl_worker.telemetry import LifecycleEmitter
from mosaic_core.capabilities import WorkerCapabilities, WorkerMetadata
from mosaic_core.errors import ConfigError, UsageError

FLAT = {
    "run_id": "facade-run-1",
    "algo": "ppo",
    "env_id": "CartPole-v1",
    "total_timesteps": 64,
    "extras": {"learning_rate": 0.001, "anneal_lr": False, "wandb_api_key": "sk-secret"},
}


def test_config_names_and_merge_semantics(tmp_path):
    assert CleanRLWorkerConfig is WorkerConfig
    config = parse_worker_config(FLAT)
    assert WorkerConfig.from_dict(config.to_dict(redacted=False)) == config
    merged = config.with_overrides(seed=3, extras={"learning_rate": 0.5, "num_envs": 2})
    assert merged.seed == 3 and merged.extras == {
        "learning_rate": 0.5,
        "anneal_lr": False,
        "wandb_api_key": "sk-secret",
        "num_envs": 2,
    }
    assert config.with_overrides(seed=None).seed is None  # None is "not given"
    nested = {"metadata": {"worker": {"config": FLAT}}}
    (tmp_path / "payload.json").write_text(json.dumps(nested))
    assert load_worker_config(tmp_path / "payload.json") == config
    assert load_worker_config_from_string(json.dumps(FLAT)) == config
    assert config.to_dict()["extras"]["wandb_api_key"] == "***"
    assert parse_worker_config({"run_id": "x", "algo": "ppo"}).total_timesteps == 500000  # the script's defaults
    with pytest.raises(ConfigError, match="missing required field.*algo"):
        parse_worker_config({"run_id": "x", "env_id": "E"})


def test_worker_metadata_from_the_package_root():
    metadata, capabilities = get_worker_metadata()
    assert isinstance(metadata, WorkerMetadata) and isinstance(capabilities, WorkerCapabilities)
    assert metadata.name == "cleanrl" and capabilities.worker_type == "cleanrl"


def test_registry_and_a_dry_run_give_mosaics_five_fields(tmp_path):
    assert {"ppo", "ppo_continuous_action", "ppo_atari", "dqn", "c51", "ppg_procgen", "ppo_rnd_envpool"} <= set(
        DEFAULT_ALGO_REGISTRY
    )
    assert DEFAULT_ALGO_REGISTRY["ppo"] == "cleanrl_worker.algorithms.ppo"  # MOSAIC's mapping
    assert DEFAULT_ALGO_REGISTRY["rainbow_atari"] == "cleanrl.rainbow_atari" and len(DEFAULT_ALGO_REGISTRY) >= 34
    runtime = CleanRLWorkerRuntime(parse_worker_config(FLAT), dry_run=True, runs_dir=tmp_path)
    module, function = runtime.resolve_entrypoint()
    assert module == "cleanrl_worker.algorithms.ppo" and function.startswith(module)  # the bundled copy
    args = runtime.build_cleanrl_args()
    assert args[:2] == ["--env-id=CartPole-v1", "--total-timesteps=64"]
    assert "--learning-rate=0.001" in args and "--no-anneal-lr" in args and not any("wandb" in a for a in args)
    summary = runtime.run()
    assert set(summary) == {"status", "module", "callable", "config", "extras"}
    assert summary["status"] == "dry-run" and summary["extras"]["wandb_api_key"] == "***"
    assert RuntimeSummary(**summary).status == "dry-run"
    assert not (tmp_path / "facade-run-1").exists()  # a dry run writes nothing
    missing = CleanRLWorkerRuntime(parse_worker_config({**FLAT, "algo": "ppg_procgen"}), dry_run=True)
    with pytest.raises(UsageError, match="ppg_procgen.*does not bundle"):
        missing.run()


def test_a_registry_of_ones_own_maps_a_name_to_a_module(tmp_path):
    config = parse_worker_config({**FLAT, "algo": "mine", "extras": {}})
    runtime = CleanRLWorkerRuntime(
        config, dry_run=True, algo_registry={"mine": "mosaic_example_plugin.random_agent"}, runs_dir=tmp_path
    )
    assert runtime.resolve_entrypoint() == (
        "mosaic_example_plugin.random_agent",
        "mosaic_example_plugin.random_agent:__main__",
    )
    assert runtime.run()["status"] == "dry-run"
    with pytest.raises(UsageError, match="not in the registry"):
        CleanRLWorkerRuntime(config, algo_registry={}).run()


def test_run_goes_through_the_supervised_pipeline(tmp_path, capsys):
    config = parse_worker_config(
        {**FLAT, "run_id": "facade-real", "total_timesteps": 256, "extras": {"num_envs": 1, "num_steps": 128}}
    )
    summary = CleanRLWorkerRuntime(config, runs_dir=tmp_path).run()
    assert summary["status"] == "completed"
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["event"] == "run_started" and lines[-1]["event"] == "run_completed"
    assert (tmp_path / "facade-real" / "manifest.json").exists()


def test_lifecycle_emitter_lines():
    out = io.StringIO()
    emitter = LifecycleEmitter("r-1", stream=out)
    emitter.run_started({"algo": "ppo"})
    emitter.heartbeat({"elapsed_s": 1.0})
    emitter.run_completed({"returncode": 0, "api_token": "t"})
    assert emitter.run_failed({}) is None  # exactly one terminal event
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["run_started", "heartbeat", "run_completed"]
    assert all(line["run_id"] == "r-1" and isinstance(line["timestamp"], float) for line in lines)
    assert lines[-1]["payload"] == {"returncode": 0, "api_token": "***"}


def test_build_manifest_writes_analytics_json(tmp_path):
    run_dir = tmp_path / "made-elsewhere"
    (run_dir / "runs" / "CartPole-v1__ppo__1__1").mkdir(parents=True)
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir / "runs" / "CartPole-v1__ppo__1__1"))
    writer.add_scalar("charts/episodic_return", 10.0, 1)
    writer.close()
    manifest = build_manifest(run_dir, {"optuna_db": "sqlite:///study.db", "wandb_api_key": "sk-x"})
    written = json.loads((run_dir / "manifest.json").read_text())
    assert written == json.loads(json.dumps(manifest))
    assert written["run_id"] == "made-elsewhere" and written["status"] == "completed"
    assert written["tensorboard"] and "optuna" in written and "sk-x" not in (run_dir / "manifest.json").read_text()


def test_register_worker_defaults_against_a_real_daemon(tmp_path):
    from mosaic_core.trainer import client
    from mosaic_core.trainer.store import RunStore
    from tests.conftest import BIN
    from tests.trainer.conftest import DaemonProcess, wait_final

    state = tmp_path / "state"
    daemon = DaemonProcess(
        [str(BIN / "mosaic"), "daemon", "--listen", "127.0.0.1:0", "--state-dir", str(state)], tmp_path
    )
    try:
        config = {
            "algo": "ppo",
            "env_id": "CartPole-v1",
            "total_timesteps": 128,
            "extras": {"num_envs": 1, "num_steps": 64, "schema_version": 3},
        }
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=180, token=daemon.token)
        assert final.terminal_event == "run_completed", final.failure_reason
        time.sleep(0.1)
    finally:
        daemon.stop()
    row = RunStore(state / "trainer.sqlite3").get(run_id)
    registration = json.loads(row.registration)
    assert row.worker_id == f"cleanrl-worker-{run_id[:8]}"  # MOSAIC's default
    assert registration["schema_id"] == "cleanrl.ppo" and registration["schema_version"] == 3
    assert registration["worker_kind"] == "cleanrl" and registration["supports_checkpoint"] is True
