"""Shared fixtures: run the real CLIs in subprocesses, in a temporary runs root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Variables that change what the host does: a test sets them itself when it means to.
HOST_VARS = {"MOSAIC_CHILD", "MOSAIC_CHANNEL", "MOSAIC_LOAD_PLUGINS", "MOSAIC_DISABLE_PLUGINS",
             "MOSAIC_STRICT_PLUGINS", "MOSAIC_TRACE_HOOKS", "MOSAIC_RUNS_DIR", "MOSAIC_CLEANRL_HOME"}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        """The JSONL lifecycle events printed on stdout (every line must be JSON)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run_cli(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300,
            input: str | None = None) -> Result:
    """Run ``mosaic ...`` (or another console script when args[0] names one) for real."""
    full_env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    # Our own console scripts by name; anything else is a mosaic command (other packages install
    # console scripts too: ray's `serve` is not `mosaic serve`).
    exe = args[0] if args[0] in ("mosaic", "cleanrl-worker") else "mosaic"
    rest = args[1:] if exe == args[0] else args
    proc = subprocess.run([str(BIN / exe), *rest], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, input=input)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session", autouse=True)
def default_worker_is_cleanrl():
    """Runs and daemon submissions that name no worker go to the CleanRL worker, whatever
    worker environments (``$MOSAIC_VENVS``) earlier tests built: with the RLlib and XuanCe
    environments ready, the rule (mosaic_core.choice) would send ``--algo PPO`` to RLlib and a
    run with no ``--algo`` nowhere. The tests of that rule clear the variable and point
    ``$MOSAIC_VENVS`` at an empty folder."""
    saved = os.environ.get("MOSAIC_DEFAULT_WORKER")
    os.environ["MOSAIC_DEFAULT_WORKER"] = "cleanrl"
    yield
    if saved is None:
        os.environ.pop("MOSAIC_DEFAULT_WORKER", None)
    else:
        os.environ["MOSAIC_DEFAULT_WORKER"] = saved


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """The user's cache (e.g. the CleanRL worker's env-check answers) in a temp dir per session:
    tests never read a cache a developer's own runs left, nor leave one."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch current directory; runs land in ``workdir/var/trainer/runs``."""
    return tmp_path


@pytest.fixture
def mosaic(workdir: Path):
    """``mosaic(*args, env=..., timeout=...)`` runs the real CLI with cwd = workdir."""

    def call(*args: str, env: dict[str, str] | None = None, timeout: float = 300, input: str | None = None) -> Result:
        return run_cli(list(args), cwd=workdir, env=env, timeout=timeout, input=input)

    return call


@pytest.fixture
def runs_root(workdir: Path) -> Path:
    return workdir / "var" / "trainer" / "runs"
