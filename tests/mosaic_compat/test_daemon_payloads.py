"""The original MOSAIC's trainer payloads, whole, through a real daemon on loopback with its
owner's token (seeds 000, 001, 002, 004): ``metadata.worker.arguments`` (the dry-run toggle, the
worker's flags), ``metadata.worker.module``, ``metadata.ui``, ``environment``, and a worker started
by hand with ``--grpc --grpc-target`` registering with the owner's daemon."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import TOKEN_ENV, bearer
from mosaic_core.trainer.manager import mosaic_run_command
from tests.conftest import HOST_VARS, run_cli
from tests.trainer.conftest import fake_config, record, start_daemon, state_dir, wait_final, wait_for  # noqa: F401

SMALL_PPO = {
    "algo": "ppo",
    "env_id": "CartPole-v1",
    "total_timesteps": 128,
    "extras": {"algo_params": {"num_envs": 1, "num_steps": 32}},
}
DRY_RUN = ["--dry-run", "--emit-summary"]  # seed 002: the Dry Run toggle's metadata.worker.arguments
PROBE = '''"""Trains nothing: writes the environment variables it is asked about into env_seen.json in
its working directory (the run directory); those in --hashed only as their sha256."""

import hashlib
import json
import os
from dataclasses import dataclass

import tyro


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 1
    seed: int = 1
    names: str = "TRACK_WANDB"
    hashed: str = ""


if __name__ == "__main__":
    args = tyro.cli(Args)
    seen = {name: os.environ.get(name) for name in args.names.split(",")}
    for name in filter(None, args.hashed.split(",")):
        value = os.environ.get(name)
        seen[name] = hashlib.sha256(value.encode()).hexdigest() if value is not None else None
    with open("env_seen.json", "w") as handle:
        json.dump(seen, handle)
'''


def mosaic_payload(
    config: dict,
    arguments: list[str] = (),
    *,
    module: str = "cleanrl_worker.cli",
    environment: dict | None = None,
    ui: dict | None = None,
    **fields,
) -> dict:
    """A trainer payload shaped as MOSAIC's CleanRL train form builds it (its TrainRunConfig)."""
    run_id = config.get("run_id", "cleanrl-ppo")
    return {
        "run_name": run_id,
        "entry_point": sys.executable,
        "arguments": ["-m", "cleanrl_worker.cli"],
        "environment": environment or {},
        "resources": {"cpus": 4, "memory_mb": 4096, "gpus": {"requested": 0, "mandatory": False}},
        "metadata": {
            "ui": ui
            or {"worker_id": "cleanrl_worker", "agent_id": "cleanrl_agent", "dry_run": "--dry-run" in arguments},
            "worker": {
                "worker_id": (ui or {}).get("worker_id", "cleanrl_worker"),
                "module": module,
                "use_grpc": True,
                "grpc_target": "127.0.0.1:50055",
                "arguments": list(arguments),
                "config": config,
            },
            "artifacts": {"tensorboard": {"enabled": False, "relative_path": None}, "notes": None},
        },
        "artifacts": {"output_prefix": f"runs/{run_id}", "persist_logs": True, "keep_checkpoints": False},
        **fields,
    }


@pytest.fixture
def daemon(start_daemon):  # noqa: F811
    """A daemon whose runs are real ``mosaic run`` processes."""
    return start_daemon(worker_command=mosaic_run_command)


def nothing_stored(daemon) -> None:
    assert client.list_runs(daemon.address) == []
    for folder in ("configs", "runs", "logs"):
        assert list((daemon.state_dir / folder).iterdir()) == [], folder


def refused(daemon, payload: dict) -> str:
    """The one-line refusal of ``payload``; nothing stored or started."""
    with pytest.raises(MosaicError) as info:
        client.submit(daemon.address, json.dumps(payload))
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    nothing_stored(daemon)
    return message


def dry_run(daemon, payload: dict) -> dict:
    reply = client.submit(daemon.address, json.dumps(payload))
    assert reply.dry_run
    nothing_stored(daemon)
    return json.loads(reply.summary_json)


# ---------------------------------------------------------------------- metadata.worker.arguments
def test_a_dry_run_payload_validates_like_the_worker_cli_and_never_trains(daemon, tmp_path):
    config = {**SMALL_PPO, "run_id": "dry-1"}
    (tmp_path / "payload.json").write_text(json.dumps(mosaic_payload(config, DRY_RUN)))
    submitted = run_cli(["submit", "payload.json", "--target", daemon.address], cwd=tmp_path, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    answer = json.loads(submitted.stdout)
    assert answer["dry_run"] is True and answer["run_id"] == "dry-1"
    nothing_stored(daemon)
    assert daemon.manager.running == 0
    assert [p for p in tmp_path.rglob("*") if "tfevents" in p.name or p.suffix == ".cleanrl_model"] == []
    # What `python -m cleanrl_worker.cli --config … --dry-run --emit-summary` prints for the same run.
    flat = {**config, "worker_id": "cleanrl_worker", "extras": {**config["extras"], "agent_id": "cleanrl_agent"}}
    (tmp_path / "worker_config.json").write_text(json.dumps(flat))
    runs = str(daemon.state_dir / "runs")
    cli = subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.cli", "--config", "worker_config.json", "--runs-dir", runs, *DRY_RUN],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    printed, summary = json.loads(cli.stdout), answer["summary"]
    for key in ("worker", "config", "command", "argv", "cwd", "module", "callable", "headline", "worker_extras"):
        assert summary[key] == printed[key], key
    assert "--num-steps=32" in summary["command"]
    nothing_stored(daemon)


def test_a_dry_run_refuses_what_the_worker_cli_refuses(daemon, tmp_path):
    config = {**SMALL_PPO, "extras": {"algo_params": {"num_stepz": 32}}}
    message = refused(daemon, mosaic_payload(config, DRY_RUN))
    (tmp_path / "worker_config.json").write_text(json.dumps(config))
    cli = run_cli(["cleanrl-worker", "--config", "worker_config.json", *DRY_RUN], cwd=tmp_path, timeout=120)
    assert cli.returncode == 2
    said = cli.stderr.strip().removeprefix("mosaic: error: ").split(" (file ")[0]
    assert "unknown flag --num-stepz" in said and said in message and "INVALID_ARGUMENT" in message


@pytest.mark.parametrize(
    "arguments, said",
    [
        (["--no-such-flag"], "flags rejected by ppo.py's Args: unknown flag --no-such-flag"),  # a script flag?
        (["--runs-dir", "/tmp/elsewhere"], "--runs-dir is the daemon's to set for every run it starts"),
        (["--config", "/etc/passwd"], "--config is the daemon's to set"),
        (["--emit-summary"], "--emit-summary needs --dry-run"),
        (["--seed", "many"], "argument --seed: invalid int value: 'many'"),
        (["--help"], "--help prints the worker's help and runs nothing"),
        (["--wandb-api-key=k"], "--wandb-api-key would put a secret on the run's command line"),
    ],
)
def test_an_argument_the_worker_does_not_take_is_refused(daemon, arguments, said):
    message = refused(daemon, mosaic_payload(SMALL_PPO, arguments))
    assert "INVALID_ARGUMENT: " in message and said in message


def test_a_worker_without_script_flags_names_the_flag_it_lacks(daemon):
    config = {"env_id": "CartPole-v1", "total_timesteps": 10}
    payload = mosaic_payload(config, ["--frobnicate"], module="mosaic_example_plugin.cli", worker="example")
    message = refused(daemon, {**payload, "arguments": []})
    assert "metadata.worker.arguments: unrecognized argument(s) --frobnicate: worker 'example' has no such" in message


def test_mosaic_submit_says_a_refused_argument_in_one_line(daemon, tmp_path):
    (tmp_path / "payload.json").write_text(json.dumps(mosaic_payload(SMALL_PPO, ["--no-such-flag"])))
    result = run_cli(["submit", "payload.json", "--target", daemon.address], cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "unknown flag --no-such-flag" in result.stderr and "Traceback" not in result.stderr
    nothing_stored(daemon)


def test_the_worker_clis_flags_are_honoured(daemon):
    overrides = ["--total-timesteps", "64", "--seed", "3", "--extras", '{"notes": "from the flags"}']
    summary = dry_run(daemon, mosaic_payload(SMALL_PPO, [*overrides, "--no-save", *DRY_RUN]))
    config = summary["config"]
    assert (config["total_timesteps"], config["seed"]) == (64, 3)
    assert config["extras"]["notes"] == "from the flags"  # --extras merged per key
    assert config["extras"]["algo_params"] == SMALL_PPO["extras"]["algo_params"]
    assert "--save-model" not in summary["argv"]  # the worker's own --no-save
    assert "--save-model" in dry_run(daemon, mosaic_payload(SMALL_PPO, DRY_RUN))["argv"]


# ---------------------------------------------------------------------- metadata.worker.module
def test_the_module_selects_the_worker_and_must_agree(daemon):
    assert dry_run(daemon, mosaic_payload(SMALL_PPO, DRY_RUN))["worker"] == "cleanrl"
    no_algo = {"env_id": "CartPole-v1", "total_timesteps": 128}
    by_module = dry_run(daemon, mosaic_payload(no_algo, DRY_RUN, module="cleanrl.dqn"))
    assert (by_module["config"]["algo"], by_module["worker"]) == ("dqn", "cleanrl")
    assert dry_run(daemon, mosaic_payload(SMALL_PPO, DRY_RUN, module="cleanrl.ppo"))["config"]["algo"] == "ppo"
    for payload, said in (
        (mosaic_payload(SMALL_PPO, DRY_RUN, module="cleanrl.dqn"), "cleanrl.dqn is algorithm 'dqn'; the config's"),
        (
            mosaic_payload(SMALL_PPO, DRY_RUN, worker="xuance"),
            "cleanrl_worker.cli is the CLI of worker 'cleanrl'; the payload's worker is 'xuance'",
        ),
        (mosaic_payload(SMALL_PPO, DRY_RUN, module="nosuch.cli"), "'nosuch.cli' is neither a worker's CLI module"),
        (
            {**mosaic_payload(SMALL_PPO, DRY_RUN, module="cleanrl.dqn"), "arguments": ["-m", "ray_worker.cli"]},
            "they must name one worker",
        ),
    ):
        message = refused(daemon, payload)
        assert "INVALID_ARGUMENT" in message and said in message, message
    # The tests' default worker is CleanRL ($MOSAIC_DEFAULT_WORKER): RLlib's CLI module picks RLlib.
    ppo = {"algo": "PPO", "env_id": "CartPole-v1", "total_timesteps": 128}  # no CleanRL algo_params
    rllib = {**mosaic_payload(ppo, DRY_RUN, module="ray_worker.cli"), "arguments": []}
    try:
        assert dry_run(daemon, rllib)["worker"] == "rllib"
    except MosaicError as exc:  # its own environment is not built here: the refusal names it
        assert "worker 'rllib' runs in its own environment" in str(exc)


# ---------------------------------------------------------------------- metadata.ui, environment
def test_ui_ids_and_environment_reach_the_run_and_the_key_no_file(start_daemon, tmp_path):  # noqa: F811
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "env_probe.py").write_text(PROBE)
    said: list[str] = []
    daemon = start_daemon(worker_command=mosaic_run_command, allow_scripts=(scripts,), log=said.append)
    key = "wandb-" + hashlib.sha256(os.urandom(16)).hexdigest()
    environment = {"WANDB_API_KEY": key, "WANDB_EMAIL": "me@example.org", "TRACK_WANDB": "1"}
    config = {"run_id": "probe-1", "algo": str(scripts / "env_probe.py"), "env_id": "CartPole-v1", "total_timesteps": 1}
    arguments = ["--names=WANDB_EMAIL,TRACK_WANDB", "--hashed=WANDB_API_KEY"]  # the probe's own flags
    arguments += ["--extras", '{"notes": "probe"}']  # the CLI's flag, folded into the config
    ui = {"worker_id": "probe-worker", "agent_id": "agent-7"}
    reply = client.submit(daemon.address, json.dumps(mosaic_payload(config, arguments, environment=environment, ui=ui)))
    final = wait_final(daemon.address, reply.run_id, timeout=120)
    assert (final.terminal_event, final.exit_code) == ("run_completed", 0), final.failure_reason
    run_dir = Path(final.run_dir)
    seen = json.loads((run_dir / "env_seen.json").read_text())
    assert seen == {
        "WANDB_EMAIL": "me@example.org",
        "TRACK_WANDB": "1",
        "WANDB_API_KEY": hashlib.sha256(key.encode()).hexdigest(),
    }
    metadata = client.record_to_dict(final)["metadata"]
    assert metadata["agent_id"] == "agent-7" and metadata["payload"]["metadata"]["ui"] == ui
    assert metadata["environment"] == sorted(environment) and metadata["run_flags"] == arguments[:2]
    assert "arguments" not in metadata["payload"]["metadata"]["worker"]  # their values are the config's
    recorded = json.loads((run_dir / "config.json").read_text())
    assert recorded["worker_id"] == "probe-worker" and recorded["extras"]["agent_id"] == "agent-7"
    assert recorded["extras"]["notes"] == "probe"
    assert daemon.store.get(reply.run_id).worker_id == "probe-worker"  # RegisterWorker's worker_id
    for root in (daemon.state_dir, run_dir):
        files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        assert files and [str(p) for p in files if key.encode() in p.read_bytes()] == []
    assert not any(key in line for line in said)


def test_a_queued_runs_environment_dies_with_the_daemon_that_took_it(start_daemon, state_dir):  # noqa: F811
    first = start_daemon(max_concurrent=1)
    busy = client.submit(first.address, fake_config({"duration": 120})).run_id
    wait_for(lambda: record(first.address, busy).status == pb.RUN_STATUS_EXEC, what="the first run to start")
    payload = mosaic_payload(json.loads(fake_config()), environment={"WANDB_EMAIL": "me@example.org"})
    queued = client.submit(first.address, json.dumps(payload)).run_id
    assert record(first.address, queued).status == pb.RUN_STATUS_INIT
    first.stop()
    again = start_daemon()  # the same state dir: the queued run is started again, without its values
    failed = wait_final(again.address, queued)
    assert failed.terminal_event == "run_failed" and not Path(failed.run_dir).exists()
    assert "its environment (WANDB_EMAIL) was given to an earlier daemon" in failed.failure_reason
    assert not [p for p in state_dir.rglob("*") if p.is_file() and b"me@example.org" in p.read_bytes()]


def test_the_worker_cli_says_what_of_a_payload_only_the_daemon_applies(tmp_path):
    payload = mosaic_payload(SMALL_PPO, ["--seed", "3"], environment={"TRACK_WANDB": "0"})
    (tmp_path / "payload.json").write_text(json.dumps(payload))
    result = run_cli(["cleanrl-worker", "--config", "payload.json", "--dry-run"], cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (
        "mosaic: note: payload.json is a trainer payload: this command runs its metadata.worker.config; "
        "its environment and metadata.worker.arguments are the trainer daemon's to apply"
    ) in result.stderr


@pytest.mark.parametrize(
    "environment, said",
    [
        ({"PYTHONPATH": "/tmp/mine"}, "environment.PYTHONPATH: MOSAIC exported it to the worker; this daemon refuses"),
        ({"LD_PRELOAD": "/tmp/x.so"}, "environment.LD_PRELOAD: MOSAIC exported it"),
        ({"MOSAIC_REGISTRATION_SECRET": "x"}, "environment.MOSAIC_REGISTRATION_SECRET: MOSAIC exported it"),
        ({"PATH": "/tmp"}, "environment.PATH: MOSAIC exported it"),
        ({"WANDB_DIR": "/tmp/w"}, "environment.WANDB_DIR: the host sets it for this run"),
        ({"TRACK WANDB": "1"}, "environment: 'TRACK WANDB' is not a variable name"),
        ({"TRACK_WANDB": 1}, "environment.TRACK_WANDB must be a string"),
    ],
)
def test_environment_the_host_owns_or_cannot_hold_is_refused(daemon, environment, said):
    message = refused(daemon, mosaic_payload(SMALL_PPO, environment=environment))
    assert "INVALID_ARGUMENT" in message and said in message, message


def test_payload_fields_the_daemon_does_differently_are_refused_or_said(daemon):
    payload = mosaic_payload(SMALL_PPO, DRY_RUN)
    payload["metadata"]["worker"]["use_grpc"] = False
    assert "metadata.worker.use_grpc is False: MOSAIC's daemon then started" in refused(daemon, payload)
    payload = mosaic_payload(SMALL_PPO, DRY_RUN)
    payload["metadata"]["worker"]["script"] = "/usr/bin/env"
    assert "metadata.worker.script: MOSAIC's daemon ran that executable" in refused(daemon, payload)
    assert "unknown field(s) entrypoint" in refused(daemon, {**mosaic_payload(SMALL_PPO, DRY_RUN), "entrypoint": "x"})
    payload = mosaic_payload(SMALL_PPO, DRY_RUN, resources={"gpus": {"requested": 1, "mandatory": True}})
    assert "FAILED_PRECONDITION: resources.gpus asks for 1 GPU(s) (mandatory)" in refused(daemon, payload)
    reply = client.submit(daemon.address, json.dumps(mosaic_payload(SMALL_PPO, DRY_RUN, entry_point="/opt/py")))
    assert any(n.startswith("grpc target 127.0.0.1:50055: MOSAIC's worker registered") for n in reply.notes)
    assert any(n.startswith("entry_point /opt/py: MOSAIC ran the worker with that program") for n in reply.notes)


# ---------------------------------------------------------------------- a worker started by hand
def hand_started(cwd: Path, target: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    """Seed 000's worked example: ``python -m cleanrl_worker.cli --config ./worker_config.json
    --grpc --grpc-target HOST:PORT …``, run by hand in ``cwd``."""
    environ = {k: v for k, v in os.environ.items() if k not in {TOKEN_ENV, *HOST_VARS}}
    command = [sys.executable, "-m", "cleanrl_worker.cli", "--config", "./worker_config.json"]
    return subprocess.run(
        [*command, "--grpc", "--grpc-target", target, *extra],
        cwd=cwd,
        env={**environ, "WANDB_MODE": "offline", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_worker_started_by_hand_registers_with_the_owners_token(start_daemon, tmp_path):  # noqa: F811
    other = start_daemon(state_dir=tmp_path / "other-state")  # another owner's daemon: its token is not ours
    daemon = start_daemon(worker_command=mosaic_run_command, heartbeat_timeout=300)
    work = tmp_path / "work"
    work.mkdir()
    (work / "worker_config.json").write_text(json.dumps({**SMALL_PPO, "run_id": "by-hand-1"}))
    for env in ({}, {TOKEN_ENV: "not-the-token"}, {TOKEN_ENV: other.token}):
        result = hand_started(work, daemon.address, env)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "refused RegisterWorker for run 'by-hand-1': UNAUTHENTICATED" in result.stderr
        assert sorted(p.name for p in work.iterdir()) == ["worker_config.json"]  # nothing left behind
        assert client.list_runs(daemon.address) == []
    extras = '{"track_wandb": true, "tensorboard_dir": "tb", "wandb_entity": "myteam", "wandb_project": "mosaic"}'
    result = hand_started(work, daemon.address, {TOKEN_ENV: daemon.token}, "--extras", extras)
    assert result.returncode == 0, result.stderr
    final = record(daemon.address, "by-hand-1")
    shown = client.record_to_dict(final)
    assert (shown["status"], shown["terminal_event"], shown["exit_code"], shown["worker"]) == (
        "TERM",
        "run_completed",
        0,
        "cleanrl",
    )
    run_dir = work / "var" / "trainer" / "runs" / "by-hand-1"
    assert shown["run_dir"] == str(run_dir) and shown["metadata"] == {"attached": True}
    assert list((run_dir / "tb").rglob("events.out.tfevents*"))  # the example's extras were honoured
    row = daemon.store.get("by-hand-1")
    assert row.worker_id == "cleanrl-worker-by-hand-" and json.loads(row.registration)["worker_kind"] == "cleanrl"
    listed = run_cli(["runs", "--target", daemon.address, "--json"], cwd=tmp_path, env={TOKEN_ENV: daemon.token})
    assert [run["run_id"] for run in json.loads(listed.stdout)] == ["by-hand-1"]
    # The token in a file, the way every mosaic call takes one.
    (work / "worker_config.json").write_text(json.dumps({**SMALL_PPO, "run_id": "by-hand-2"}))
    token_file = daemon.state_dir / "client.token"
    assert hand_started(work, daemon.address, {}, "--token-file", str(token_file)).returncode == 0
    assert record(daemon.address, "by-hand-2").terminal_event == "run_completed"
    assert other.store.list() == []


def test_an_attached_run_is_the_owners_only_and_its_silence_fails_it(start_daemon, tmp_path):  # noqa: F811
    daemon = start_daemon(heartbeat_timeout=2.0)
    spawned = client.submit(daemon.address, fake_config({"register": False, "duration": 120})).run_id
    wait_for(lambda: record(daemon.address, spawned).status == pb.RUN_STATUS_EXEC, what="the spawned run to start")
    with pytest.raises(MosaicError, match="UNAUTHENTICATED: run .* a first RegisterWorker needs the registration"):
        client.RunSession.register(daemon.address, run_id=spawned, worker_kind="cleanrl", client_token=daemon.token)
    session = client.RunSession.register(
        daemon.address, run_id="by-hand", worker_kind="cleanrl", client_token=daemon.token
    )
    assert session.report_events and record(daemon.address, "by-hand").status == pb.RUN_STATUS_RDY
    with grpc.insecure_channel(daemon.address) as channel:
        stub = pb_grpc.TrainerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:  # a spawned run's events come from its process
            stub.ReportRunEvent(
                pb.RunEventReport(run_id=spawned, event="run_completed"), timeout=10, metadata=session.metadata
            )
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # and this session is not that run's
        with pytest.raises(grpc.RpcError) as info:
            stub.CancelRun(pb.CancelRunRequest(run_id="by-hand"), timeout=10, metadata=bearer(daemon.token))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "stop the program where it runs" in info.value.details()
    session.report_event({"event": "run_started", "payload": {"run_dir": str(tmp_path), "algo": "ppo"}})
    assert record(daemon.address, "by-hand").status == pb.RUN_STATUS_EXEC
    failed = wait_final(daemon.address, "by-hand", timeout=60)  # no heartbeat for 2 s
    assert failed.terminal_event == "run_failed" and "no heartbeat for" in failed.failure_reason
    (tmp_path / "kept.txt").write_text("its program's files")
    client.remove_run(daemon.address, "by-hand")  # its record goes; files outside the state dir stay
    assert record(daemon.address, "by-hand") is None and (tmp_path / "kept.txt").exists()
    session.close()
    client.cancel(daemon.address, spawned)
