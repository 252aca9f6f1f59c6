"""Issue 19, what a client may ask of the daemon: idle streams cannot starve it, telemetry is
capped, strict and refused after the run ended, submitted configs are checked as a dry run
(sizes capped, nothing stored when refused), script paths run only where the owner allowed,
and the default number of concurrent runs follows the machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import bearer

from .conftest import CONFIG, fake_config, record, wait_final, wait_for


def test_idle_watch_streams_do_not_starve_the_daemon(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"))
    channel = grpc.insecure_channel(daemon.target)
    stub = pb_grpc.TrainerServiceStub(channel)
    streams = [
        stub.WatchRuns(pb.WatchRunsRequest(since_seq=10**9), timeout=120, metadata=bearer(daemon.token))
        for _ in range(64)
    ]
    try:
        wait_for(
            lambda: sum(not s.running() for s in streams) >= 16 or all(s.running() for s in streams),
            what="the streams to be served or refused",
        )
        # Health, list and submit answer at once, and a run's training program can still register.
        assert client.health(daemon.target, timeout=5).healthy
        assert client.list_runs(daemon.target, timeout=5) == []
        run_id = client.submit(daemon.target, fake_config({"duration": 0.2}), timeout=10).run_id
        final = wait_final(daemon.target, run_id)
        assert final.terminal_event == "run_completed", final.failure_reason
        assert record(daemon.target, run_id).exit_code == 0
        refused = [s for s in streams if not s.running()]
        assert refused and {s.code() for s in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert "at most 48 open streams" in refused[0].details()
    finally:
        for stream in streams:
            stream.cancel()
        channel.close()


def _worker_for(daemon) -> tuple[str, client.RunSession]:
    run_id = client.submit(daemon.address, fake_config({"register": False, "duration": 120})).run_id
    wait_for(lambda: record(daemon.address, run_id).status == pb.RUN_STATUS_EXEC, what="the run to start")
    path = Path(record(daemon.address, run_id).run_dir) / "registration.secret"
    secret = wait_for(lambda: path.exists() and path.read_text(), what="its registration secret")
    return run_id, client.RunSession.register(daemon.address, run_id=run_id, registration_secret=secret)


def test_telemetry_is_capped_strict_and_refused_after_the_run(start_daemon):
    daemon = start_daemon(telemetry_items_per_run=50)
    run_id, session = _worker_for(daemon)
    with session:
        reply = session.publish_steps(pb.RunStep(step_index=i, observation_json="[1, 2]") for i in range(80))
        assert (reply.accepted, reply.dropped) == (50, 30)
        assert session.publish_episodes([pb.RunEpisode(run_id=run_id)]).dropped == 1  # the cap covers both kinds
        for bad, problem in (
            (
                pb.RunStep(run_id=run_id, observation_json="[NaN]"),
                "item 0: observation_json is not valid JSON: NaN is not a number JSON allows",
            ),
            (pb.RunStep(run_id=run_id, action_json="{"), "item 0: action_json is not valid JSON"),
            (pb.RunStep(run_id=run_id, render_payload_json='"' + "x" * 300_000 + '"'), "item 0 is 300"),
            (pb.RunStep(run_id=run_id, action_json="[" * 40 + "]" * 40), "item 0: action_json nests deeper than 32"),
        ):
            with pytest.raises(MosaicError, match="INVALID_ARGUMENT: PublishRunSteps: " + problem):
                session.publish_steps([bad])
        with pytest.raises(MosaicError, match=r"INVALID_ARGUMENT: PublishRunEpisodes: item 0: metadata_json"):
            session.publish_episodes([pb.RunEpisode(run_id=run_id, metadata_json="{'single': 'quotes'}")])
        client.cancel(daemon.address, run_id)
        with pytest.raises(MosaicError, match="FAILED_PRECONDITION: run .* already ended"):
            session.publish_steps([pb.RunStep(run_id=run_id)])
    stored = list(client.watch_runs(daemon.address, timeout=1))  # the daemon still serves
    assert stored and len(daemon.store.read_telemetry(run_id, "steps", 0, limit=1000)) == 50


def test_a_publish_stream_stops_storing_when_its_run_ends(start_daemon):
    daemon = start_daemon()
    run_id, session = _worker_for(daemon)

    def steps():
        for i in range(100):
            if i == 10:
                client.cancel(daemon.address, run_id)
            yield pb.RunStep(run_id=run_id, step_index=i, observation_json="[0]")

    with session, pytest.raises(MosaicError, match=r"FAILED_PRECONDITION: run .* ended; its telemetry is no longer"):
        session.publish_steps(steps())
    assert len(daemon.store.read_telemetry(run_id, "steps", 0)) == 0  # the batch in hand was not stored


@pytest.mark.parametrize(
    "config, code, message",
    [
        ({**CONFIG, "extras": {"pad": "x" * 300_000}}, "INVALID_ARGUMENT", "config_json is 3000"),
        ("[" * 100 + "]" * 100, "INVALID_ARGUMENT", "config_json nests deeper than 32 levels"),
        ({**CONFIG, "extras": {"tensorboard_dir": "../../outside"}}, "INVALID_ARGUMENT", "tensorboard_dir"),
        ({**CONFIG, "env_id": "Cart\u0000Pole-v1"}, "INVALID_ARGUMENT", "env_id holds a NUL character"),
        (
            {**CONFIG, "extras": {"algo_params": {"x\u0000": 1}}},
            "INVALID_ARGUMENT",
            "extras.algo_params has a key holding a NUL",
        ),
        ({**CONFIG, "extras": {"learning_rat": 0.1}}, "INVALID_ARGUMENT", "unknown flag --learning-rat"),
        ({**CONFIG, "run_id": "run\n"}, "INVALID_ARGUMENT", "run_id must be"),
    ],
)
def test_submissions_are_checked_as_a_dry_run_before_anything_is_stored(daemon, config, code, message):
    text = config if isinstance(config, str) else json.dumps(config)
    with pytest.raises(MosaicError) as info:
        client.submit(daemon.address, text)
    assert f"{code}: " in str(info.value) and message in str(info.value)
    assert client.list_runs(daemon.address) == []
    assert list((daemon.state_dir / "configs").iterdir()) == [] and list((daemon.state_dir / "runs").iterdir()) == []


def test_script_paths_run_only_where_the_owner_allowed(start_daemon, tmp_path):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    for folder in (allowed, other):
        folder.mkdir()
        (folder / "algo.py").write_text(
            (Path(__file__).parents[2] / "plugins/cleanrl_worker/algorithms/ppo.py").read_text()
        )
    (allowed / "escape.py").symlink_to(other / "algo.py")
    config = lambda algo, **extras: json.dumps({**CONFIG, "algo": algo, "extras": extras})
    default = start_daemon()
    refusals = []
    for algo in (str(allowed / "algo.py"), str(other / "algo.py"), str(other / "missing.py"), "algo.py", "/etc/shadow"):
        with pytest.raises(MosaicError, match="FAILED_PRECONDITION: algo names code by path") as info:
            client.submit(default.address, config(algo))
        refusals.append(str(info.value))
    assert len(set(refusals)) == 1  # the same words whether the file exists or not
    with pytest.raises(MosaicError, match="FAILED_PRECONDITION: extras.cleanrl_home names code by path"):
        client.submit(default.address, config("ppo", cleanrl_home=str(other)))
    default.stop()

    owner = start_daemon(allow_scripts=(allowed,))
    accepted = client.submit(owner.address, config(str(allowed / "algo.py"))).run_id
    assert record(owner.address, accepted) is not None
    for algo, why in (
        (str(other / "algo.py"), "algo names code by path"),
        (str(allowed / ".." / "other" / "algo.py"), "algo names code by path"),
        (str(allowed / "escape.py"), f"algo resolves to {other / 'algo.py'}, outside"),
    ):
        with pytest.raises(MosaicError, match=f"FAILED_PRECONDITION: {why}"):
            client.submit(owner.address, config(algo))


def test_default_concurrency_follows_the_machine(daemon_process, tmp_path):
    daemon = daemon_process("--state-dir", str(tmp_path / "state"), mosaic=True)
    assert client.health(daemon.target).max_concurrent == len(os.sched_getaffinity(0))
