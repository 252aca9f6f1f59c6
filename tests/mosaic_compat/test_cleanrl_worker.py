"""The CleanRL worker as a user of the original MOSAIC types and imports it (seeds 000, 001, 002,
004): ``python -m cleanrl_worker.cli`` with every flag of seed 000, its configs flat (seed 004's
example) and nested, the extras the original's UI sent, the dry-run summary, and the facade's
``config`` / ``runtime`` / ``telemetry`` names. Runs go through the real CLI in a subprocess;
what reached the training process is read back from the run directory (a probe script that
writes its parsed ``Args`` and environment there, ``tests/fixtures/cleanrl_probe``)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cleanrl_worker.config import WorkerConfig, load_worker_config, parse_worker_config
from cleanrl_worker.runtime import DEFAULT_ALGO_REGISTRY, CleanRLWorkerRuntime
from cleanrl_worker.telemetry import LifecycleEmitter
from mosaic_core import DEFAULT_GRPC_TARGET, ConfigError
from tests.conftest import BIN, HOST_VARS, Result, run_cli

PROBE = Path(__file__).parents[1] / "fixtures" / "cleanrl_probe" / "probe.py"
SEED_004 = {
    "algorithm": "ppo",
    "learning_rate": 3e-4,
    "total_timesteps": 1_000_000,
    "num_envs": 4,
    "capture_video": True,
}
WORKER_CONFIG = {
    "run_id": "01JC0MPAT0000000000000000A",
    "algo": "ppo",
    "env_id": "CartPole-v1",
    "total_timesteps": 2048,
}
SUMMARY_FIELDS = {"status", "module", "callable", "config", "extras"}  # the original's RuntimeSummary
CONFIG_FIELDS = {"run_id", "algo", "env_id", "total_timesteps", "seed", "worker_id", "extras", "raw"}  # what it printed


def worker_cli(*args: str, cwd: Path, timeout: float = 300, input: str | None = None) -> Result:
    """``python -m cleanrl_worker.cli ARGS`` for real, in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.cli", *args],
        cwd=cwd,
        env={**env, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return path.name


def summary_of(result: Result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_line_error(result: Result, *names: str) -> str:
    assert result.returncode == 2 and result.stdout == "", (result.stdout, result.stderr)
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith("mosaic: error: ") and "Traceback" not in line, result.stderr
    for name in names:
        assert name in line, line
    return line


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ------------------------------------------------------------------ seed 004's flat config
def test_seed_004_config_verbatim_dry_run_prints_the_summary_and_writes_nothing(workdir):
    name = write(workdir / "worker.json", SEED_004)
    summary = summary_of(worker_cli("--config", name, "--dry-run", "--emit-summary", cwd=workdir))
    assert SUMMARY_FIELDS | CONFIG_FIELDS <= set(summary)
    assert summary["status"] == "dry-run" and summary["module"] == "cleanrl_worker.algorithms.ppo"
    assert summary["callable"].startswith(summary["module"])
    # `algorithm` is algo; the budget is the config's; env_id is ppo's own default; run_id generated
    assert (summary["algo"], summary["env_id"], summary["total_timesteps"]) == ("ppo", "CartPole-v1", 1_000_000)
    assert len(summary["run_id"]) == 26 and summary["seed"] is None and summary["worker_id"] is None
    params = {"learning_rate": 3e-4, "num_envs": 4, "capture_video": True}  # the algorithm's hyperparameters
    assert summary["extras"] == summary["config"]["extras"] == {"algo_params": params}
    assert {"--learning-rate=0.0003", "--num-envs=4", "--capture-video"} <= set(summary["argv"])
    assert summary["raw"] == SEED_004 and "raw" not in summary["config"]
    assert files_under(workdir) == {"worker.json"}  # nothing written
    script = summary_of(run_cli(["cleanrl-worker", "--config", name, "--dry-run", "--emit-summary"], cwd=workdir))
    same = ("status", "module", "callable", "extras", "argv", "algo", "env_id", "total_timesteps", "raw")
    assert {k: script[k] for k in same} == {k: summary[k] for k in same}  # `cleanrl-worker`: the same


@pytest.fixture(scope="module")
def seed_004_run(tmp_path_factory) -> tuple[Path, Result]:
    """Seed 004's config trained for real on a tiny budget (``--total-timesteps`` and two
    hyperparameters given on the command line): (the run's directory, the result)."""
    workdir = tmp_path_factory.mktemp("seed004")
    name = write(workdir / "worker.json", SEED_004)
    tiny = json.dumps({"algo_params": {"num_steps": 16, "update_epochs": 1}})
    result = worker_cli("--config", name, "--total-timesteps", "512", "--extras", tiny, "--run-id", "s004", cwd=workdir)
    return workdir / "var" / "trainer" / "runs" / "s004", result


def test_seed_004_config_trains_with_its_hyperparameters(seed_004_run):
    run_dir, result = seed_004_run
    assert result.returncode == 0, result.stderr
    events = result.events
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    argv = events[0]["payload"]["argv"]
    assert argv[:2] == ["--env-id=CartPole-v1", "--total-timesteps=512"]
    assert {"--learning-rate=0.0003", "--num-envs=4", "--capture-video", "--num-steps=16"} <= set(argv)
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["algo"] == "ppo" and recorded["total_timesteps"] == 512 and "raw" not in recorded
    assert recorded["extras"]["algo_params"] == {
        "num_steps": 16,
        "update_epochs": 1,
        "learning_rate": 3e-4,
        "num_envs": 4,
        "capture_video": True,
    }
    assert list((run_dir / "videos").rglob("*.mp4"))  # capture_video reached the script
    assert (run_dir / "checkpoints" / "step_512.cleanrl_model").is_file()


def test_resume_training_with_policy_path_continues_the_checkpoint(seed_004_run, tmp_path):
    run_dir, first = seed_004_run
    assert first.returncode == 0, first.stderr
    checkpoint = run_dir / "checkpoints" / "step_512.cleanrl_model"
    config = {
        **SEED_004,
        "total_timesteps": 1024,
        "num_steps": 16,
        "update_epochs": 1,
        "extras": {"mode": "resume_training", "policy_path": str(checkpoint)},
    }
    result = worker_cli("--config", write(tmp_path / "resume.json", config), "--run-id", "resumed", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"--resume-from={checkpoint}" in result.events[0]["payload"]["argv"]
    resumed = tmp_path / "var" / "trainer" / "runs" / "resumed" / "checkpoints"
    assert [p.name for p in resumed.iterdir()] == ["step_1024.cleanrl_model"]  # 512 more steps, not 1024


# ------------------------------------------------------------------ seed 000's worked examples and flags
WORKED_EXAMPLES = [
    ["--dry-run", "--emit-summary"],
    [
        "--grpc",
        "--grpc-target",
        "127.0.0.1:50055",
        "--extras",
        '{"track_wandb": true, "tensorboard_dir": "tb", "wandb_entity": "myteam", "wandb_project": "mosaic"}',
    ],
    ["--extras", '{"algo_params": {"num_envs": 8, "learning_rate": 0.0003, "gamma": 0.99}}'],
    [
        "--grpc",
        "--grpc-target",
        "127.0.0.1:50055",
        "--extras",
        '{"supports_pause": true, "supports_checkpoint": true, "schema_version": 2}',
    ],
]


def test_the_worked_examples_of_seed_000_dry_run(workdir):
    (workdir / "worker_config.json").write_text(json.dumps({"metadata": {"worker": {"config": WORKER_CONFIG}}}))
    summaries = []
    for example in WORKED_EXAMPLES:
        argv = ["--config", "./worker_config.json", *example]
        if "--dry-run" not in argv:
            argv += ["--dry-run", "--emit-summary"]  # a dry run registers with no daemon
        summaries.append(summary_of(worker_cli(*argv, cwd=workdir)))
    plain, tracked, params, hints = summaries
    assert plain["run_id"] == WORKER_CONFIG["run_id"] and plain["raw"]["metadata"]["worker"]["config"] == WORKER_CONFIG
    assert plain["argv"][:2] == ["--env-id=CartPole-v1", "--total-timesteps=2048"]
    assert {"--track", "--wandb-project-name=mosaic", "--wandb-entity=myteam"} <= set(tracked["argv"])
    assert tracked["env"]["TRACK_WANDB"] == "1"
    assert {"--num-envs=8", "--learning-rate=0.0003", "--gamma=0.99"} <= set(params["argv"])
    assert hints["extras"]["schema_version"] == 2 and not any("supports" in a for a in hints["argv"])
    assert files_under(workdir) == {"worker_config.json"}


def test_the_algo_params_example_trains_with_a_tiny_budget(workdir):
    (workdir / "worker_config.json").write_text(json.dumps({"metadata": {"worker": {"config": WORKER_CONFIG}}}))
    example = WORKED_EXAMPLES[2]
    result = worker_cli("--config", "./worker_config.json", *example, "--total-timesteps", "1024", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert [e["event"] for e in result.events][-1] == "run_completed"
    argv = result.events[0]["payload"]["argv"]
    assert {"--total-timesteps=1024", "--num-envs=8", "--gamma=0.99"} <= set(argv)


def test_every_flag_of_seed_000_overrides_the_config(workdir):
    name = write(workdir / "worker.json", WORKER_CONFIG)
    flags = [
        *("--config", name, "--algo", "dqn", "--env-id", "Acrobot-v1", "--total-timesteps", "3000"),
        *("--seed", "7", "--worker-id", "bench-3", "--extras", '{"notes": "from the CLI"}'),
        *("--grpc", "--grpc-target", "127.0.0.1:1", "--dry-run", "--emit-summary"),
    ]
    summary = summary_of(worker_cli(*flags, cwd=workdir))
    assert (summary["algo"], summary["env_id"], summary["total_timesteps"]) == ("dqn", "Acrobot-v1", 3000)
    assert (summary["seed"], summary["worker_id"], summary["extras"]) == (7, "bench-3", {"notes": "from the CLI"})
    assert summary["module"] == "cleanrl_worker.algorithms.dqn" and "--seed=7" in summary["argv"]
    assert files_under(workdir) == {"worker.json"}  # a dry run never registers nor writes


def test_grpc_target_defaults_to_mosaics_address(workdir):
    host, port = DEFAULT_GRPC_TARGET.split(":")
    assert DEFAULT_GRPC_TARGET == "127.0.0.1:50055"
    with socket.socket() as probe:
        if probe.connect_ex((host, int(port))) == 0:
            pytest.skip(f"something listens on {DEFAULT_GRPC_TARGET}")
    name = write(workdir / "worker.json", {**WORKER_CONFIG, "total_timesteps": 64})
    result = worker_cli("--config", name, "--grpc", cwd=workdir, timeout=120)
    assert result.returncode == 1 and "127.0.0.1:50055" in result.stderr and "daemon" in result.stderr
    assert "Traceback" not in result.stderr and files_under(workdir) == {"worker.json"}


# ------------------------------------------------------------------ the extras MOSAIC's UI sent
def test_mosaic_extras_reach_the_training_process_as_the_original_meant(workdir, runs_root):
    """A flat config with the original's keys at the top level, run for real on the probe."""
    config = {
        "algorithm": str(PROBE),
        "agent_id": "agent-7",
        "track_wandb": True,
        "wandb_email": "operator@example.org",
        "wandb_run_path": "team/proj/abc123",
        "use_cuda": False,
        "total_frames": 4000,
        "learning_rate": 0.001,
        "capture_video": True,
    }
    result = worker_cli("--config", write(workdir / "worker.json", config), "--run-id", "probe", cwd=workdir)
    assert result.returncode == 0, result.stderr
    probe = json.loads((runs_root / "probe" / "probe.json").read_text())
    args = probe["args"]
    assert (args["env_id"], args["total_timesteps"]) == ("CartPole-v1", 1000)  # the script's own defaults
    assert args["cuda"] is False and args["track"] is True and args["capture_video"] is True
    assert args["total_frames"] == 4000 and args["learning_rate"] == 0.001  # tyro parsed every flag
    assert probe["env"]["TRACK_WANDB"] == "1" and probe["env"]["WANDB_EMAIL"] == "operator@example.org"
    assert probe["env"]["PYTHONUNBUFFERED"] == "1"
    assert not any(
        word in " ".join(probe["argv"]) for word in ("agent", "email", "run-path", "track-wandb", "use-cuda")
    )
    recorded = json.loads((runs_root / "probe" / "config.json").read_text())["extras"]
    assert recorded["agent_id"] == "agent-7" and recorded["wandb_run_path"] == "team/proj/abc123"
    assert recorded["algo_params"] == {"learning_rate": 0.001, "capture_video": True}
    assert result.events[0]["payload"]["agent_id"] == "agent-7"
    assert json.loads((runs_root / "probe" / "manifest.json").read_text())["agent_id"] == "agent-7"


@pytest.mark.parametrize(
    "extras, flag",
    [({"cuda": False}, "--no-cuda"), ({"use_cuda": True}, "--cuda"), ({"use_cuda": False}, "--no-cuda")],
)
def test_cuda_and_use_cuda_are_the_scripts_cuda_flag(workdir, extras, flag):
    name = write(workdir / "worker.json", WORKER_CONFIG)
    argv = summary_of(
        worker_cli("--config", name, "--extras", json.dumps(extras), "--dry-run", "--emit-summary", cwd=workdir)
    )
    assert flag in argv["argv"] and not any(a.startswith("--use-cuda") for a in argv["argv"])


def test_agent_id_from_extras_is_metadata_never_a_flag(workdir):
    name = write(workdir / "worker.json", {**WORKER_CONFIG, "extras": {"agent_id": "spade-1"}})
    summary = summary_of(worker_cli("--config", name, "--dry-run", "--emit-summary", cwd=workdir))
    assert summary["extras"] == {"agent_id": "spade-1"} and not any("agent" in a for a in summary["argv"])


@pytest.mark.parametrize("where", ["extras", "algo_params"])
def test_total_frames_for_a_script_without_it_is_refused_in_one_line(workdir, runs_root, where):
    extras = {"total_frames": 10_000_000} if where == "extras" else {"algo_params": {"total_frames": 10_000_000}}
    name = write(workdir / "worker.json", {**WORKER_CONFIG, "extras": extras})
    line = one_line_error(worker_cli("--config", name, cwd=workdir), "total_frames", "total_timesteps", name)
    assert "--total-frames=10000000" in line and "ppo.py" in line
    assert not runs_root.exists()


def test_mode_interactive_is_the_interactive_flag(workdir):
    name = write(workdir / "worker.json", {**WORKER_CONFIG, "extras": {"mode": "interactive"}})
    flag = write(workdir / "plain.json", WORKER_CONFIG)
    by_mode = summary_of(worker_cli("--config", name, "--dry-run", "--emit-summary", cwd=workdir))
    by_flag = summary_of(worker_cli("--config", flag, "--interactive", "--dry-run", "--emit-summary", cwd=workdir))
    assert by_mode["mode"] == by_flag["mode"] == "interactive"
    assert (by_mode["argv"], by_mode["command"]) == (by_flag["argv"], by_flag["command"])
    session = worker_cli(
        *("--config", name, "--extras", '{"interactive_render": false}'),
        cwd=workdir,
        input='{"cmd": "reset", "seed": 3}\n{"cmd": "step", "action": 0}\n{"cmd": "stop"}\n',
    )
    assert session.returncode == 0, session.stderr
    assert [line["type"] for line in session.events] == ["ready", "reset", "step", "stopped"]


# ------------------------------------------------------------------ bad input
BAD = [
    ({**SEED_004, "total_timesteps": "many"}, ["total_timesteps"]),
    ({**SEED_004, "seed": 1.5}, ["seed"]),
    ({**SEED_004, "algorithm": "ppo_nosuch"}, ["ppo_nosuch", "algo"]),
    ({**SEED_004, "lerning_rate": 0.1}, ["lerning_rate", "--learning-rate"]),
    ({**SEED_004, "algo": "dqn"}, ["algorithm", "algo"]),
    ({**SEED_004, "extras": {"algo_params": {"learning_rate": 0.1}}}, ["learning_rate"]),
    ({**SEED_004, "extras": {"agent_id": 7}}, ["agent_id"]),
]


@pytest.mark.parametrize("config, names", BAD, ids=[str(n) for _, n in BAD])
def test_bad_input_is_one_line_naming_the_field_and_the_file(workdir, config, names):
    name = write(workdir / "worker.json", config)
    one_line_error(worker_cli("--config", name, cwd=workdir), *names, name)
    assert files_under(workdir) == {"worker.json"}  # nothing started, nothing left behind


# ------------------------------------------------------------------ the Python facade
def test_config_raw_overrides_and_equality(tmp_path):
    payload = {
        "metadata": {"worker": {"config": {**WORKER_CONFIG, "extras": {"notes": "n"}}}},
        "environment": {"MY_SERVICE_TOKEN": "tok-raw-only"},
    }
    (tmp_path / "payload.json").write_text(json.dumps(payload))
    config = load_worker_config(tmp_path / "payload.json")
    assert config.raw == payload and "raw" not in config.to_dict() and "tok-raw-only" not in repr(config)
    again = parse_worker_config({**WORKER_CONFIG, "extras": {"notes": "n"}})
    assert again == config and again.raw != config.raw  # raw is not part of equality
    assert WorkerConfig.from_dict(config.to_dict()) == config
    changed = config.with_overrides(
        worker_id="w-2", algo="dqn", env_id="Acrobot-v1", total_timesteps=64, seed=5, extras={"agent_id": "a"}
    )
    assert (changed.worker_id, changed.algo, changed.env_id, changed.total_timesteps, changed.seed) == (
        "w-2",
        "dqn",
        "Acrobot-v1",
        64,
        5,
    )
    assert changed.extras == {"notes": "n", "agent_id": "a"} and changed.raw == payload
    assert config.with_overrides(seed=None, extras={"notes": "mine"}).extras == {"notes": "mine"}  # wins per key
    with pytest.raises(ConfigError, match="total_timesteps"):
        config.with_overrides(total_timesteps=0)
    flat = parse_worker_config(dict(SEED_004))
    assert flat.algo == "ppo" and flat.env_id == "CartPole-v1" and flat.raw == SEED_004


def test_raw_never_reaches_the_run_directory(workdir, runs_root):
    payload = {
        "metadata": {"worker": {"config": {"run_id": "rawrun", "algo": str(PROBE), "total_timesteps": 32}}},
        "environment": {"MY_SERVICE_TOKEN": "tok-raw-only"},
        "trainer_note": "kept-in-memory-only",
    }
    name = write(workdir / "payload.json", payload)
    summary = summary_of(worker_cli("--config", name, "--dry-run", "--emit-summary", cwd=workdir))
    assert summary["raw"]["environment"] == {"MY_SERVICE_TOKEN": "***"} and "tok-raw-only" not in json.dumps(summary)
    result = worker_cli("--config", name, cwd=workdir)
    assert result.returncode == 0, result.stderr
    for path in (runs_root / "rawrun").rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert b"tok-raw-only" not in text and b"kept-in-memory-only" not in text, path


def test_runtime_builds_the_arguments_and_dry_run_summary(tmp_path):
    assert {"ppo", "ppo_continuous_action", "ppo_atari", "dqn", "c51", "ppg_procgen", "ppo_rnd_envpool"} <= set(
        DEFAULT_ALGO_REGISTRY
    )
    config = parse_worker_config(
        {
            **WORKER_CONFIG,
            "seed": 3,
            "extras": {
                "cuda": False,
                "capture_video": True,
                "track_wandb": True,
                "wandb_project_name": "proj",
                "wandb_entity": "team",
                "algo_params": {"learning_rate": 0.001},
            },
        }
    )
    runtime = CleanRLWorkerRuntime(
        config, use_grpc=False, grpc_target="127.0.0.1:50055", dry_run=True, algo_registry=DEFAULT_ALGO_REGISTRY
    )
    args = runtime.build_cleanrl_args()
    assert args[:3] == ["--env-id=CartPole-v1", "--total-timesteps=2048", "--seed=3"]
    expected = {"--no-cuda", "--capture-video", "--track", "--wandb-project-name=proj", "--wandb-entity=team"}
    assert expected | {"--learning-rate=0.001"} <= set(args)
    summary = runtime.run()
    assert set(summary) == SUMMARY_FIELDS and summary["status"] == "dry-run"
    assert summary["config"]["extras"]["algo_params"] == {"learning_rate": 0.001}
    with pytest.raises(Exception, match="not in the registry"):
        CleanRLWorkerRuntime(config, use_grpc=False, grpc_target="x:1", algo_registry={"dqn": "cleanrl.dqn"}).run()


def test_lifecycle_emitter_takes_the_originals_run_id_and_payload():
    out = io.StringIO()
    emitter = LifecycleEmitter(stream=out)  # the original's LifecycleEmitter(): the run named per call
    emitter.run_started("r-1", {"algo": "ppo", "env_id": "CartPole-v1"})
    emitter.heartbeat("r-1", {"status": "running"})
    emitter.run_failed("r-1", {"reason": "cleanrl_process_failed", "return_code": 3})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["run_id"]) for line in lines] == [
        ("run_started", "r-1"),
        ("heartbeat", "r-1"),
        ("run_failed", "r-1"),
    ]
    assert lines[-1]["payload"] == {"reason": "cleanrl_process_failed", "return_code": 3}
    ours = LifecycleEmitter("r-2", stream=io.StringIO())
    assert ours.run_completed({"status": "completed"})["run_id"] == "r-2"
    with pytest.raises(ValueError, match="r-2"):
        ours.heartbeat("r-3", {})


def test_register_worker_carries_the_seeds_capability_hints(tmp_path):
    """Seed 000's hints: ``supports_pause: true`` is refused at submission (a CleanRL script cannot
    pause: the daemon would wait on a pause that never comes); the rest reach RegisterWorker."""
    from mosaic_core.errors import MosaicError
    from mosaic_core.trainer import client
    from mosaic_core.trainer.store import RunStore
    from tests.trainer.conftest import DaemonProcess, wait_final

    state = tmp_path / "state"
    daemon = DaemonProcess(
        [str(BIN / "mosaic"), "daemon", "--listen", "127.0.0.1:0", "--state-dir", str(state)], tmp_path
    )
    try:
        config = {
            **SEED_004,
            "total_timesteps": 128,
            "num_envs": 1,
            "num_steps": 64,
            "capture_video": False,
            "worker_id": "gui-worker-1",
            "agent_id": "agent-1",
            "extras": {"supports_pause": True, "supports_checkpoint": True, "schema_version": 2},
        }
        with pytest.raises(MosaicError, match="supports_pause is true but worker 'cleanrl' cannot pause"):
            client.submit(daemon.target, json.dumps(config), token=daemon.token)
        config["extras"]["supports_pause"] = False
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=180, token=daemon.token)
        assert final.terminal_event == "run_completed", final.failure_reason
        time.sleep(0.1)
    finally:
        daemon.stop()
    row = RunStore(state / "trainer.sqlite3").get(run_id)
    registration = json.loads(row.registration)
    assert row.worker_id == "gui-worker-1" and registration["worker_kind"] == "cleanrl"
    assert registration["proto_version"] == "MOSAIC/1.0" and registration["schema_id"] == "cleanrl.ppo"
    assert registration["schema_version"] == 2
    assert registration["supports_pause"] is False and registration["supports_checkpoint"] is True
