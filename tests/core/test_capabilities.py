import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanrl_worker.metadata import CAPABILITIES, METADATA
from mosaic_core.capabilities import ACTION_SPACES, OBSERVATION_SPACES, PARADIGMS, WorkerCapabilities, WorkerMetadata


def test_cleanrl_declares_the_design_capabilities():
    caps = CAPABILITIES
    assert caps.worker_type == "cleanrl" and caps.supported_paradigms == ("sequential",)
    assert set(caps.env_families) == {"gymnasium", "atari", "procgen", "mujoco", "dm_control", "minigrid", "babyai"}
    assert caps.action_spaces == ("discrete", "continuous") and caps.observation_spaces == ("vector", "image")
    assert caps.max_agents == 1 and caps.supports_checkpointing and not caps.requires_gpu
    assert caps.estimated_memory_mb == 512


@pytest.mark.parametrize(
    "change, message",
    [
        ({"worker_type": "Bad Name"}, "worker_type"),
        ({"supported_paradigms": ()}, "must not be empty"),
        ({"action_spaces": ("teleport",)}, "'teleport' is not one of"),
        ({"observation_spaces": "vector"}, "must be a list"),
        ({"max_agents": 0}, "max_agents"),
        ({"requires_gpu": "yes"}, "requires_gpu"),
        ({"supports_env_switching": "no"}, "supports_env_switching"),
        ({"gpu_memory_mb": 100}, "requires_gpu is false"),
        ({"cpu_cores": True}, "cpu_cores"),
    ],
)
def test_invalid_capabilities_are_rejected_naming_the_field(change, message):
    data = {**CAPABILITIES.to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        WorkerCapabilities(**data)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CAPABILITIES.max_agents = 3  # type: ignore[misc]


capabilities = st.builds(
    WorkerCapabilities,
    worker_type=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
    supported_paradigms=st.lists(st.sampled_from(sorted(PARADIGMS)), min_size=1, max_size=3).map(tuple),
    env_families=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3).map(tuple),
    action_spaces=st.lists(st.sampled_from(sorted(ACTION_SPACES)), min_size=1, max_size=3).map(tuple),
    observation_spaces=st.lists(st.sampled_from(sorted(OBSERVATION_SPACES)), min_size=1, max_size=3).map(tuple),
    max_agents=st.integers(1, 64),
    supports_self_play=st.booleans(),
    requires_gpu=st.just(False),
    cpu_cores=st.integers(1, 64),
    estimated_memory_mb=st.integers(0, 10**6),
)


@given(capabilities)
def test_json_round_trip(caps):
    assert WorkerCapabilities.from_dict(json.loads(json.dumps(caps.to_dict()))) == caps


def test_metadata_round_trip_and_unknown_fields():
    meta = METADATA
    assert WorkerMetadata.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta
    with pytest.raises(ValueError, match="unknown field"):
        WorkerCapabilities.from_dict({**CAPABILITIES.to_dict(), "colour": "red"})
    with pytest.raises(ValueError, match="worker"):
        WorkerMetadata(name="x", version="1", description="d", capabilities=CAPABILITIES, worker="not a path")


def test_the_name_is_given_once_the_entry_points():
    from mosaic_core.workers import discover_workers

    unnamed = WorkerMetadata(
        version="1",
        description="d",
        worker="pkg.mod:W",
        capabilities=WorkerCapabilities(
            supported_paradigms=("sequential",),
            env_families=("g",),
            action_spaces=("discrete",),
            observation_spaces=("vector",),
        ),
    )
    named = unnamed.named("mine")
    assert named.name == "mine" and named.capabilities.worker_type == "mine"  # the type defaults to the name
    assert METADATA.named("cleanrl") is METADATA
    found = {item.name: item for item in discover_workers()}
    assert found["example"].obj.name == "example"  # its descriptor leaves the name to its entry point
    assert found["example-venv"].obj.capabilities.worker_type == "example"  # a type shared on purpose
