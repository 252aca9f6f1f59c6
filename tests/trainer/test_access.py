"""Issue 19, daemon access: the client token, registration secrets, private state files,
the CLI's credential, loopback-only ``--insecure``. A real daemon process on loopback; the
attacker is a second local user (uid 65534) where the point is about another user."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from pathlib import Path

import grpc
import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import TOKEN_ENV, bearer

from .conftest import fake_config, record, wait_final, wait_for
from .second_user import attack, needs_second_user

WAITING = {"register": False, "duration": 120}  # a run whose process waits; the test plays its worker


def _waiting_run(target: str) -> tuple[str, str]:
    """A started run that has not registered, and the registration secret its process got."""
    run_id = client.submit(target, fake_config(WAITING)).run_id
    wait_for(lambda: record(target, run_id).status == pb.RUN_STATUS_EXEC, what="the run to start")
    path = Path(record(target, run_id).run_dir) / "registration.secret"
    return run_id, wait_for(lambda: path.exists() and path.read_text(), what="its registration secret")


@needs_second_user
def test_a_second_user_can_neither_control_nor_read_the_daemon(daemon_process, tmp_path):
    state = tmp_path / "state"
    daemon = daemon_process("--state-dir", str(state))
    victim, secret = _waiting_run(daemon.target)
    folder = Path(tempfile.mkdtemp(prefix="mosaic-attacker-"))
    try:
        folder.chmod(0o755)
        script = folder / "evil.py"
        script.write_text("open('/tmp/mosaic-pwned', 'w').write('root')\n")
        files = [
            state / "client.token",
            state / "trainer.sqlite3",
            state / "trainer.sqlite3-wal",
            state / "configs" / f"{victim}.json",
            state / "logs" / f"{victim}.stderr.log",
            state / "daemon.json",
        ]
        found = attack(daemon.target, victim, str(script), files)
    finally:
        script.unlink()
        folder.rmdir()
    controls = {name: code for name, code in found.items() if not name.startswith(("read ", "GetHealth"))}
    assert set(controls.values()) == {"UNAUTHENTICATED"}, controls
    assert found["GetHealth"] == "OK"  # whether a daemon answers is no secret
    assert {found[f"read {path}"] for path in files} == {"EACCES"}
    # The victim is untouched: still running, and its own training program registers with its secret.
    assert [r.run_id for r in client.list_runs(daemon.target)] == [victim]
    with client.RunSession.register(daemon.target, run_id=victim, registration_secret=secret) as session:
        assert session.heartbeat() == {"ok": True}
    assert record(daemon.target, victim).status == pb.RUN_STATUS_EXEC


def test_registration_needs_the_secret_the_run_was_given(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"))
    seen: list[bytes] = []
    watcher = threading.Thread(
        target=lambda: seen.extend(r.SerializeToString() for r in client.watch_runs(daemon.target, timeout=6)),
        daemon=True,
    )
    watcher.start()
    run_id, secret = _waiting_run(daemon.target)
    # Holding the client token is not enough to register as a run's training program (it lets a
    # program started by hand register a run of its own, never one the daemon started).
    for wrong, token in ((None, None), ("not-the-secret", None), (None, daemon.token)):
        with pytest.raises(MosaicError, match="UNAUTHENTICATED: (run .*: )?a first RegisterWorker needs the registra"):
            client.RunSession.register(daemon.target, run_id=run_id, registration_secret=wrong, client_token=token)
    session = client.RunSession.register(daemon.target, run_id=run_id, registration_secret=secret)
    with pytest.raises(MosaicError, match="ALREADY_EXISTS"):  # a secret opens one registration
        client.RunSession.register(daemon.target, run_id=run_id, registration_secret=secret)
    session.heartbeat()
    client.cancel(daemon.target, run_id)
    watcher.join()
    assert seen and not any(secret.encode() in r or session.session_token.encode() in r for r in seen)
    session.close()


def test_the_secret_is_in_no_command_line(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"))
    run_id, secret = _waiting_run(daemon.target)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        assert secret.encode() not in cmdline
    client.cancel(daemon.target, run_id)


def test_state_files_are_private(daemon_process, tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)  # a pre-existing, looser state dir is made private
    daemon = daemon_process("--state-dir", str(state))
    run_id = client.submit(daemon.target, fake_config({"duration": 0.2}, extras={"learning_rate": 0.01})).run_id
    wait_final(daemon.target, run_id)
    token = state / "client.token"
    assert token.read_text().strip() == daemon.token and len(daemon.token) >= 40
    files = [
        token,
        state / "daemon.json",
        state / "daemon.lock",
        state / "trainer.sqlite3",
        state / "trainer.sqlite3-wal",
        state / "trainer.sqlite3-shm",
        state / "configs" / f"{run_id}.json",
        state / "logs" / f"{run_id}.stderr.log",
    ]
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {path.name: 0o600 for path in files}
    for folder in (state, state / "configs", state / "logs", state / "runs"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    daemon.stop()
    assert not token.exists()  # the token dies with its daemon


def test_every_control_call_needs_the_token_and_health_does_not(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"))
    channel = grpc.insecure_channel(daemon.target)
    stub = pb_grpc.TrainerServiceStub(channel)
    calls = {
        "SubmitRun": lambda md: stub.SubmitRun(pb.SubmitRunRequest(config_json=fake_config()), timeout=10, metadata=md),
        "CancelRun": lambda md: stub.CancelRun(pb.CancelRunRequest(run_id="x"), timeout=10, metadata=md),
        "ListRuns": lambda md: stub.ListRuns(pb.ListRunsRequest(), timeout=10, metadata=md),
        "RemoveRun": lambda md: stub.RemoveRun(pb.RemoveRunRequest(run_id="x"), timeout=10, metadata=md),
        "ListWorkers": lambda md: stub.ListWorkers(pb.ListWorkersRequest(), timeout=10, metadata=md),
        "WatchRuns": lambda md: list(stub.WatchRuns(pb.WatchRunsRequest(), timeout=2, metadata=md)),
        "StreamRunEpisodes": lambda md: list(
            stub.StreamRunEpisodes(pb.StreamEpisodesRequest(run_id="x"), timeout=2, metadata=md)
        ),
    }
    with channel:
        for name, call in calls.items():
            for metadata in ([], bearer("wrong"), [("authorization", daemon.token)]):
                with pytest.raises(grpc.RpcError) as info:
                    call(metadata)
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
                assert "client token" in info.value.details() and daemon.token not in info.value.details()
        assert stub.GetHealth(pb.HealthCheckRequest(), timeout=10).healthy
        assert stub.ListRuns(pb.ListRunsRequest(), timeout=10, metadata=bearer(daemon.token)).runs is not None


def test_the_cli_finds_the_token(mosaic, workdir, daemon_process):
    state = workdir / "state"
    daemon = daemon_process("--state-dir", str(state))
    (workdir / "w.json").write_text(fake_config({"duration": 120}))
    target = ["--target", daemon.target]
    without = {TOKEN_ENV: ""}
    refused = mosaic("submit", "w.json", *target, env=without, timeout=60)
    assert (
        refused.returncode == 2  # a missing credential is the caller's to fix, like a bad flag
        and "refused SubmitRun: UNAUTHENTICATED: SubmitRun needs the daemon's client token" in refused.stderr
        and len(refused.stderr.strip().splitlines()) == 1
    )
    for run_id, how in (
        ("by-state-dir", ["--state-dir", str(state)]),
        ("by-token-file", ["--token-file", str(state / "client.token")]),
    ):
        result = mosaic("submit", "w.json", *target, "--run-id", run_id, *how, env=without, timeout=60)
        assert result.returncode == 0, result.stderr
    result = mosaic("submit", "w.json", *target, "--run-id", "by-env", env={TOKEN_ENV: daemon.token}, timeout=60)
    assert result.returncode == 0, result.stderr
    for how, env in (
        ([], {TOKEN_ENV: daemon.token}),
        (["--state-dir", str(state)], without),
        (["--token-file", str(state / "client.token")], without),
    ):
        listed = mosaic("runs", *target, "--json", *how, env=env, timeout=60)
        assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == ["by-env", "by-state-dir", "by-token-file"]
    refused = mosaic("runs", *target, env=without, timeout=60)
    assert refused.returncode == 2 and "refused ListRuns: UNAUTHENTICATED" in refused.stderr
    for run_id in ("by-env", "by-state-dir", "by-token-file"):
        result = mosaic("cancel", run_id, *target, "--state-dir", str(state), env=without, timeout=60)
        assert result.returncode == 0, result.stderr
    missing = mosaic("submit", "w.json", *target, "--token-file", "nope", timeout=60)
    assert missing.returncode == 2 and "cannot read the daemon's client token from nope" in missing.stderr


def test_insecure_is_loopback_only_and_says_so(mosaic, workdir, daemon_process):
    refused = mosaic("daemon", "--listen", "0.0.0.0:0", "--insecure", "--state-dir", "s", timeout=60)
    assert refused.returncode == 2 and "refusing to serve it without the client token (--insecure)" in refused.stderr
    assert "TLS is not built" in refused.stderr and list(workdir.iterdir()) == []
    daemon = daemon_process("--state-dir", str(workdir / "state"), "--insecure", mosaic=True)
    assert daemon.token is None and not (workdir / "state" / "client.token").exists()
    assert client.list_runs(daemon.target, token="") == []
    assert "warning: --insecure: anyone on this machine can submit code" in daemon.log()
