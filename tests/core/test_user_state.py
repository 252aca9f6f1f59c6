"""Tests never touch the user's worker environments, runs, caches or tokens (tests/conftest.py
``private_user_state``): a ``make test`` with the user's own ``$MOSAIC_VENVS`` set once rebuilt
the user's RLlib environment with the tests' extras and deleted the one installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, TEST_VENVS_VAR, USER_VARS


def test_the_session_has_private_environments_caches_and_token_dirs(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    private = ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "NETRC")
    assert all(Path(os.environ[name]).is_relative_to(base) for name in private), {n: os.environ[n] for n in private}
    venvs = Path(os.environ["MOSAIC_VENVS"])
    assert venvs == Path(os.environ[TEST_VENVS_VAR]) if os.environ.get(TEST_VENVS_VAR) else venvs.is_relative_to(base)
    assert not any(os.environ.get(name) for name in USER_VARS)


def test_a_session_started_with_the_users_settings_uses_none_of_them(tmp_path):
    user = {
        "MOSAIC_VENVS": str(tmp_path / "users-venvs"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MOSAIC_TOKEN": "users-token",
        "MOSAIC_RUNS_DIR": str(tmp_path / "users-runs"),
        "WANDB_API_KEY": "k" * 40,
    }
    env = {k: v for k, v in os.environ.items() if k != TEST_VENVS_VAR}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_the_session_has_private_environments_caches_and_token_dirs",
        ],
        cwd=REPO,
        env={**env, **user},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert not any(tmp_path.iterdir())  # nothing made where the user's settings point
