"""RegisterWorker, session tokens and telemetry against a real daemon on loopback."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import grpc
import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import REGISTRATION_METADATA, bearer
from mosaic_core.trainer.protocol import PROTO_VERSION, TOKEN_METADATA

from .conftest import fake_config, record, wait_final, wait_for

LONG = {"register": False, "duration": 120}  # a run that waits for the test to register for it


SECRETS: dict[str, str] = {}  # run -> the registration secret its process got from the daemon


def _waiting(target: str) -> str:
    """Submit a run whose process is up and does not register; returns its id once its
    registration secret (from the process's environment) is known."""
    run_id = client.submit(target, fake_config(LONG)).run_id
    wait_for(lambda: record(target, run_id).status == pb.RUN_STATUS_EXEC, what="the run to start")
    path = Path(record(target, run_id).run_dir) / "registration.secret"
    SECRETS[run_id] = wait_for(lambda: path.exists() and path.read_text(), what="the registration secret")
    return run_id


@pytest.fixture
def waiting_run(daemon):
    """A run whose process is up and has not registered; the test plays its worker."""
    return _waiting(daemon.address)


def _register(target: str, run_id: str, **kwargs) -> client.RunSession:
    kwargs.setdefault("registration_secret", SECRETS.get(run_id))
    return client.RunSession.register(target, run_id=run_id, schema_id="fake.test", **kwargs)


def _stub(target: str):
    channel = grpc.insecure_channel(target)
    return channel, pb_grpc.TrainerServiceStub(channel)


def test_good_handshake_then_heartbeats(daemon, waiting_run):
    with _register(daemon.address, waiting_run, worker_id="w1") as session:
        assert session.accepted_version == PROTO_VERSION
        assert len(session.session_token) >= 32
        before = record(daemon.address, waiting_run).last_heartbeat.ToNanoseconds()
        assert session.heartbeat() == {"ok": True}
        assert record(daemon.address, waiting_run).last_heartbeat.ToNanoseconds() >= before


def test_minor_versions_accepted_other_majors_refused(daemon, waiting_run):
    channel, stub = _stub(daemon.address)
    with channel:
        reply = stub.RegisterWorker(
            pb.RegisterWorkerRequest(run_id=waiting_run, proto_version="MOSAIC/1.3", worker_kind="cleanrl"),
            timeout=5,
            metadata=[(REGISTRATION_METADATA, SECRETS[waiting_run])],
        )
        assert reply.accepted_version == "MOSAIC/1.0"
        with pytest.raises(grpc.RpcError) as info:
            stub.RegisterWorker(
                pb.RegisterWorkerRequest(run_id=waiting_run, proto_version="MOSAIC/2.0"),
                timeout=5,
                metadata=[(TOKEN_METADATA, reply.session_token)],
            )
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "MOSAIC/2.0" in info.value.details() and "MOSAIC/1.x" in info.value.details()


def test_unknown_run_and_wrong_worker_kind_refused(daemon, waiting_run):
    # Without a credential the gate answers before reading the body: the same for every run id.
    with pytest.raises(MosaicError, match="UNAUTHENTICATED: a first RegisterWorker needs the registration secret"):
        _register(daemon.address, "ghost")
    with pytest.raises(
        MosaicError,
        match="NOT_FOUND: run 'ghost' has no worker to register: it is not one of this daemon's runs, or it has ended",
    ):
        _register(daemon.address, "ghost", registration_secret=SECRETS[waiting_run])
    with pytest.raises(MosaicError, match="FAILED_PRECONDITION: .*submitted for worker 'cleanrl', not 'other'"):
        _register(daemon.address, waiting_run, worker_kind="other")


def test_concurrent_registrations_one_wins(daemon, waiting_run):
    results: list[object] = []
    barrier = threading.Barrier(8)

    def attempt() -> None:
        barrier.wait()
        try:
            results.append(_register(daemon.address, waiting_run))
        except MosaicError as exc:
            results.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sessions = [r for r in results if isinstance(r, client.RunSession)]
    errors = [str(r) for r in results if isinstance(r, MosaicError)]
    assert len(sessions) == 1 and len(errors) == 7
    assert all("ALREADY_EXISTS" in e and "already has a registered training program" in e for e in errors)
    winner = sessions[0]
    # Only the current token may replace the worker; the old token is void afterwards.
    with pytest.raises(MosaicError, match="UNAUTHENTICATED"):
        _register(daemon.address, waiting_run, session_token="not-the-token")
    replacement = _register(daemon.address, waiting_run, session_token=winner.session_token)
    assert replacement.session_token != winner.session_token
    assert winner.heartbeat()["ok"] is False and "UNAUTHENTICATED" in winner.heartbeat()["error"]
    assert replacement.heartbeat() == {"ok": True}
    for s in (winner, replacement):
        s.close()


def test_concurrent_registrations_for_many_runs(daemon):
    run_ids = [_waiting(daemon.address) for _ in range(4)]
    sessions: dict[str, client.RunSession] = {}

    def attempt(run_id: str) -> None:
        sessions[run_id] = _register(daemon.address, run_id)

    threads = [threading.Thread(target=attempt, args=(r,)) for r in run_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(sessions) == sorted(run_ids)
    assert len({s.session_token for s in sessions.values()}) == 4
    for s in sessions.values():
        s.close()


def test_token_required_for_heartbeat_and_telemetry(daemon, waiting_run):
    session = _register(daemon.address, waiting_run)
    channel, stub = _stub(daemon.address)
    with channel, session:
        for metadata, expected in (
            (None, "a session token is required"),  # the gate answers both,
            ([(TOKEN_METADATA, "wrong")], "a session token is required"),
        ):  # unread
            with pytest.raises(grpc.RpcError) as info:
                stub.Heartbeat(pb.HeartbeatRequest(run_id=waiting_run), timeout=5, metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED and expected in info.value.details()
            with pytest.raises(grpc.RpcError) as info:
                stub.PublishRunSteps(iter([pb.RunStep(run_id=waiting_run)]), timeout=5, metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as info:
                stub.PublishRunEpisodes(iter([pb.RunEpisode(run_id=waiting_run)]), timeout=5, metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # A valid token for one run does not write another run's data.
        other = _waiting(daemon.address)
        with pytest.raises(grpc.RpcError) as info:
            stub.PublishRunSteps(iter([pb.RunStep(run_id=other)]), timeout=5, metadata=session.metadata)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED

        reply = session.publish_steps(pb.RunStep(run_id=waiting_run, step_index=i, reward=0.5) for i in range(1200))
        assert (reply.accepted, reply.dropped) == (1200, 0)
        reply = session.publish_episodes([pb.RunEpisode(run_id=waiting_run, episode_index=0, total_reward=3.0)])
        assert reply.accepted == 1
        client.cancel(daemon.address, waiting_run)
        auth = bearer(daemon.token)
        steps = list(
            stub.StreamRunSteps(pb.StreamStepsRequest(run_id=waiting_run, since_seq=1000), timeout=10, metadata=auth)
        )
        assert [s.step_index for s in steps] == list(range(1000, 1200))
        assert [s.seq_id for s in steps] == list(range(1001, 1201))
        episodes = list(stub.StreamRunEpisodes(pb.StreamEpisodesRequest(run_id=waiting_run), timeout=10, metadata=auth))
        assert [e.total_reward for e in episodes] == [3.0]
        # After the run ended nothing more is recorded for it.
        with pytest.raises(grpc.RpcError) as info:
            stub.Heartbeat(pb.HeartbeatRequest(run_id=waiting_run), timeout=5, metadata=session.metadata)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(MosaicError, match="FAILED_PRECONDITION: run .* already ended"):
            session.publish_steps([pb.RunStep(run_id=waiting_run, step_index=5000)])


def test_no_daemon_gives_a_clear_error():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(
        MosaicError,
        match=rf"no trainer daemon answered at 127.0.0.1:{port} \(RegisterWorker for run 'r' after 3 tries\): UNAVAILABLE",
    ):
        client.RunSession.register(f"127.0.0.1:{port}", run_id="r", timeout=1.0)


def test_control_stream_unimplemented(daemon, waiting_run):
    channel, stub = _stub(daemon.address)
    with pytest.raises(grpc.RpcError) as info:
        list(stub.ControlStream(iter([pb.ControlEvent(run_id="r", pause=True)]), timeout=5))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # no credential: refused unread
    with _register(daemon.address, waiting_run) as session, channel, pytest.raises(grpc.RpcError) as info:
        list(stub.ControlStream(iter([pb.ControlEvent(run_id="r", pause=True)]), timeout=5, metadata=session.metadata))
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED and "not supported" in info.value.details()


def test_real_worker_handshake_fields_recorded(daemon):
    run_id = client.submit(daemon.address, fake_config({"duration": 0.2})).run_id
    final = wait_final(daemon.address, run_id)
    assert final.terminal_event == "run_completed"
    row = daemon.store.get(run_id)
    assert row.worker_id == "fake-1" and '"schema_id": "fake.test"' in row.registration
