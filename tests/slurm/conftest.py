"""One real Slurm cluster (one node, 2 CPUs) for this folder's tests, stopped when they end; skipped, saying why, where
slurm-wlm is not installed or we are not root. Tests find it through ``$SLURM_CONF``."""

from __future__ import annotations

import os

import pytest

from tests.slurm.cluster import SlurmCluster, why_not_here


@pytest.fixture(scope="package")
def slurm(tmp_path_factory):
    reason = why_not_here()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    saved = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ["SLURM_CONF"] = str(cluster.conf)  # the CLI processes the tests start inherit it
        yield cluster
        assert not cluster.jobs(), f"Slurm jobs left at the end of the session: {cluster.jobs()}"
    finally:
        left = cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        assert not left, f"Slurm daemons that would not stop: {left}"


@pytest.fixture
def no_jobs_left(slurm):
    """The test's jobs are gone (ended or cancelled) when it ends."""
    yield
    assert not slurm.jobs(), f"Slurm jobs left by the test: {slurm.jobs()}"
