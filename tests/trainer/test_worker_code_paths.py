"""The daemon's script policy holds every worker's code paths, not one worker's fields: the
example worker (not CleanRL) runs a policy file given as ``algo``, and a real daemon refuses it
outside ``--allow-scripts``."""

from __future__ import annotations

import json

import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client

from .conftest import record

POLICY = "def act(observation, action_space):\n    return 0\n"


def test_the_daemon_refuses_another_workers_code_path_outside_allow_scripts(start_daemon, tmp_path):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    for folder in (allowed, other):
        folder.mkdir()
        (folder / "policy.py").write_text(POLICY)
    (allowed / "escape.py").symlink_to(other / "policy.py")
    config = lambda algo: json.dumps(
        {"worker": "example", "algo": algo, "env_id": "CartPole-v1", "total_timesteps": 10}
    )
    default = start_daemon()
    for algo in (str(allowed / "policy.py"), str(other / "missing.py"), "policy.py"):
        with pytest.raises(MosaicError, match="FAILED_PRECONDITION: algo names code by path"):
            client.submit(default.address, config(algo))
    assert client.submit(default.address, config("first")).run_id  # the worker's own policies need no permission
    default.stop()

    owner = start_daemon(allow_scripts=(allowed,))
    accepted = client.submit(owner.address, config(str(allowed / "policy.py"))).run_id
    assert record(owner.address, accepted) is not None
    with pytest.raises(MosaicError, match="FAILED_PRECONDITION: algo names code by path"):
        client.submit(owner.address, config(str(other / "policy.py")))
    with pytest.raises(MosaicError, match=f"FAILED_PRECONDITION: algo resolves to {other / 'policy.py'}, outside"):
        client.submit(owner.address, config(str(allowed / "escape.py")))
