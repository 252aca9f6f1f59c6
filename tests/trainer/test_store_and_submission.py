"""The state store, SubmitRun's parsing and the protocol helpers, without a server."""

from __future__ import annotations

import json

import pytest

from cleanrl_worker.launcher import gpu_request
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.protocol import PROTO_VERSION, VersionError, check_target, negotiate, status_value
from mosaic_core.trainer.store import EXEC, HSHK, INIT, TERM, DuplicateRun, RunStore, hash_token, token_matches
from mosaic_core.trainer.submission import PreconditionError, parse_submission
from mosaic_core.workers import discover_workers


def _insert(store: RunStore, run_id: str, **values):
    values = {
        "worker": "cleanrl",
        "status": INIT,
        "digest": "d",
        "config_json": "{}",
        "config_path": f"/x/{run_id}.json",
        "run_dir": f"/x/{run_id}",
        **values,
    }
    return store.insert(run_id=run_id, **values)


def test_versions_negotiated_by_major():
    assert negotiate("MOSAIC/1.0") == PROTO_VERSION
    assert negotiate("MOSAIC/1.7") == PROTO_VERSION
    for bad in ("MOSAIC/2.0", "MOSAIC/0.9", "mosaic", ""):
        with pytest.raises(VersionError, match="MOSAIC/1"):
            negotiate(bad)


def test_targets_and_statuses_checked():
    assert check_target("127.0.0.1:50055") == ("127.0.0.1", 50055)
    assert check_target("[::1]:0") == ("[::1]", 0)
    for bad in ("localhost", "a:b", "h:70000", "", "h:1 --x"):
        with pytest.raises(UsageError, match="HOST:PORT"):
            check_target(bad)
    assert status_value("exec") == status_value("RUN_STATUS_EXEC") == pb.RUN_STATUS_EXEC
    with pytest.raises(UsageError, match="unknown run status"):
        status_value("running")


def test_store_sequences_changes_and_survives_reopen(tmp_path):
    store = RunStore(tmp_path / "s.sqlite3")
    first = _insert(store, "a")
    second = _insert(store, "b")
    assert second.seq_id == first.seq_id + 1
    with pytest.raises(DuplicateRun):
        _insert(store, "a")
    updated = store.update("a", status=EXEC, pid=123, pgid=123)
    assert updated.seq_id > second.seq_id and updated.status == EXEC
    assert [r.run_id for r in store.changed_since(second.seq_id)] == ["a"]
    assert store.update("a", check=lambda r: r.status == INIT, status=TERM) is None  # vetoed
    store.close()

    reopened = RunStore(tmp_path / "s.sqlite3")
    assert reopened.get("a").pid == 123 and reopened.seq == updated.seq_id
    assert reopened.get("b").status == INIT
    reopened.close()


def test_tokens_are_stored_hashed(tmp_path):
    store = RunStore(tmp_path / "s.sqlite3")
    _insert(store, "a", token_hash=hash_token("secret"), status=HSHK)
    row = store.get("a")
    assert row.token_hash != "secret"
    assert token_matches(row, "secret") and not token_matches(row, "other") and not token_matches(row, None)
    store.close()


def test_telemetry_numbered_per_run(tmp_path):
    store = RunStore(tmp_path / "s.sqlite3")
    _insert(store, "a", status=EXEC)
    _insert(store, "b", status=EXEC)
    assert store.append_telemetry("a", "steps", [pb.RunStep(run_id="a", step_index=i) for i in range(3)]) == 3
    assert store.append_telemetry("b", "steps", [pb.RunStep(run_id="b")]) == 1
    read = [pb.RunStep.FromString(d) for d in store.read_telemetry("a", "steps", 1)]
    assert [(s.seq_id, s.step_index) for s in read] == [(2, 1), (3, 2)]
    store.close()


@pytest.fixture(scope="module")
def workers() -> list[LoadedEntryPoint]:
    return discover_workers()


def test_submission_flat_nested_and_worker_key(workers):
    flat = parse_submission(
        json.dumps({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10, "worker": "cleanrl"}),
        "r1",
        workers,
        gpus=0,
    )
    assert (flat.run_id, flat.worker, flat.config.algo) == ("r1", "cleanrl", "ppo")
    nested = parse_submission(
        json.dumps(
            {
                "metadata": {
                    "worker": {
                        "config": {"run_id": "r2", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10}
                    }
                }
            }
        ),
        "",
        workers,
        gpus=0,
    )
    assert nested.run_id == "r2" and nested.worker == "cleanrl"
    generated = parse_submission(
        json.dumps({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1}), "", workers, 0
    )
    assert len(generated.run_id) == 26  # a ULID
    assert flat.digest != generated.digest and len(flat.digest) == 64


@pytest.mark.parametrize(
    "text, field",
    [
        ('{"algo": "ppo", ', "config_json"),
        ('{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": -1}', "total_timesteps"),
        ('{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1, "worker": "nope"}', "worker"),
        ('{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1, "extras": []}', "extras"),
        ('{"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1, "run_id": "../x"}', "run_id"),
    ],
)
def test_malformed_submissions_name_the_field(workers, text, field):
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        parse_submission(text, "", workers, gpus=0)


def test_gpu_requests_refused_without_a_gpu(workers):
    for extras, key in (
        ({"cuda": True}, "extras.cuda"),
        ({"algo_params": {"cuda": True}}, "extras.algo_params.cuda"),
        ({"device": "cuda:0"}, "extras.device"),
        ({"num_gpus": 2}, "extras.num_gpus"),
    ):
        assert gpu_request(extras) == key
        text = json.dumps({"algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1, "extras": extras})
        with pytest.raises(PreconditionError, match=f"{key} asks for a GPU"):
            parse_submission(text, "", workers, gpus=0)
        if key == "extras.cuda":  # the others are not flags of ppo.py: refused as a dry run refuses them
            assert parse_submission(text, "", workers, gpus=1).config.extras == extras
    assert gpu_request({"cuda": False, "device": "cpu"}) is None
