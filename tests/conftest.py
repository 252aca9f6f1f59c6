"""Shared fixtures: run the real CLIs in subprocesses, in a temporary runs root."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

# pytest keeps the test modules it rewrites (their asserts) in __pycache__, as Python keeps any module's
# bytecode, unless bytecode writing is off (PYTHONDONTWRITEBYTECODE, as on CI's machines): then each of
# a CI run's pytest processes rewrote the 350 modules again, half of its collection (7 of 15 CPU-s).
# This process writes them; the processes the tests start keep the environment's choice.
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Variables that change what the host does: a test sets them itself when it means to.
HOST_VARS = {
    "MOSAIC_CHILD",
    "MOSAIC_CHANNEL",
    "MOSAIC_LOAD_PLUGINS",
    "MOSAIC_DISABLE_PLUGINS",
    "MOSAIC_STRICT_PLUGINS",
    "MOSAIC_TRACE_HOOKS",
    "MOSAIC_RUNS_DIR",
    "MOSAIC_CLEANRL_HOME",
}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        """The JSONL lifecycle events printed on stdout (every line must be JSON)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def run_cli(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300, input: str | None = None
) -> Result:
    """Run ``mosaic ...`` (or another console script when args[0] names one) for real."""
    full_env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    # Our own console scripts by name; anything else is a mosaic command (other packages install
    # console scripts too: ray's `serve` is not `mosaic serve`).
    exe = args[0] if args[0] in ("mosaic", "cleanrl-worker") else "mosaic"
    rest = args[1:] if exe == args[0] else args
    proc = subprocess.run(
        [str(BIN / exe), *rest], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, input=input
    )
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


# CI's name for the worker environments its lanes share (``.ci/run`` sets it; nobody else should):
# without it each test session builds them in a temp dir of its own.
TEST_VENVS_VAR = "MOSAIC_TEST_VENVS"
# The user's own settings and secrets: no test reads them (a test that means one sets it itself).
USER_VARS = (
    "MOSAIC_RUNS_DIR",
    "MOSAIC_TOKEN",
    "MOSAIC_REGISTRATION_SECRET",
    "MOSAIC_SECRET_EXTRAS",
    "MOSAIC_SHARE_RUNS",
    "MOSAIC_CLEANRL_HOME",
    "MOSAIC_RAY_ADDRESS",
    "RAY_ADDRESS",
    "WANDB_API_KEY",
    # the terminal's size: a piped CLI's tables are as wide under pytest-xdist (which sets 80 x 24)
    # as in a plain session
    "COLUMNS",
    "LINES",
)


@pytest.fixture(scope="session", autouse=True)
def private_user_state(tmp_path_factory):
    """Tests never touch the user's worker environments, runs, caches, daemon state or tokens:
    ``$MOSAIC_VENVS`` (a test build must not replace the user's environment of a worker),
    ``$XDG_DATA_HOME`` (the default venvs and data), ``$XDG_CACHE_HOME`` (e.g. the CleanRL
    worker's env-check answers), ``$XDG_RUNTIME_DIR`` (servers' token files) and ``$NETRC`` (W&B
    keys) point into a temp dir per session, and :data:`USER_VARS` are unset. The worker
    environments are CI's shared folder when ``$MOSAIC_TEST_VENVS`` names one. Runs and daemon
    state go to each test's own directory (``workdir``, ``--runs-dir``, ``--state-dir``). pip's
    download cache is the one thing shared with the user."""
    home = tmp_path_factory.mktemp("user")
    # pip's download cache stays the user's: content-addressed, it only spares a build the downloads
    pip_cache = os.environ.get("PIP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pip"
    )
    private = {
        "PIP_CACHE_DIR": pip_cache,
        "MOSAIC_VENVS": os.environ.get(TEST_VENVS_VAR) or str(home / "venvs"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_RUNTIME_DIR": str(home / "runtime"),
        "NETRC": str(home / "netrc"),
    }
    (home / "runtime").mkdir(mode=0o700)  # only a directory that exists is used
    saved = {name: os.environ.get(name) for name in (*private, *USER_VARS)}
    for name in USER_VARS:
        os.environ.pop(name, None)
    os.environ.update(private)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# The workers with environments of their own, and the environment extras their tests use (RLlib's: the
# env families its capabilities claim, tested in tests/rllib/test_env_families.py).
WORKER_ENV_EXTRAS = {"xuance": "", "rllib": "atari,mujoco"}


def build_worker_environment(worker: str) -> dict[str, str]:
    """``mosaic workers install WORKER`` (with :data:`WORKER_ENV_EXTRAS`), once per test session
    under the session's private ``$MOSAIC_VENVS`` (:func:`private_user_state`: CI's shared
    ``$MOSAIC_TEST_VENVS``, else a temp dir); the environment variables under which `mosaic` finds it."""
    env = dict(os.environ)
    env.pop("MOSAIC_RUNS_DIR", None)
    env.pop("RAY_ADDRESS", None)
    extras = WORKER_ENV_EXTRAS[worker]
    command = [sys.executable, "-m", "mosaic_core.cli.main", "workers", "install", worker]
    command += ["--extras", extras] if extras else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(command[3:])} failed: {done.stderr[-2000:]}"
    return env


def worker_bin(env: dict[str, str], worker: str) -> Path:
    """The ``bin`` folder of the environment ``worker`` uses now under ``env``'s ``$MOSAIC_VENVS``
    (its ``WORKER.json`` names the build: an older build of another key may still be beside it)."""
    venvs = Path(env["MOSAIC_VENVS"])
    return venvs / json.loads((venvs / f"{worker}.json").read_text())["name"] / "bin"


@pytest.fixture(scope="session")
def xuance_env():
    """The environment variables under which `mosaic` finds the built XuanCe environment."""
    return build_worker_environment("xuance")


@pytest.fixture(scope="session")
def rllib_env():
    """The environment variables under which `mosaic` finds the built RLlib environment."""
    return build_worker_environment("rllib")


@pytest.fixture
def busy_cores():
    """Load for stop tests: ``busy_cores()`` starts a busy loop per core this process may use
    (real work competing with the run's processes); they are killed when the test ends."""
    loops: list[subprocess.Popen] = []

    def start() -> None:
        for _ in range(len(os.sched_getaffinity(0))):
            loops.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))

    yield start
    for loop in loops:
        loop.kill()
        loop.wait()


def ctrl_c_half_way(proc: subprocess.Popen, run_dir: Path, total: int, busy_cores) -> str:
    """Wait for the run's first metric (then busy both cores), and for a metric at half of
    ``total``; then Ctrl-C ``proc``'s process group, as a terminal does (:func:`ctrl_c_at`)."""
    return ctrl_c_at(proc, run_dir, total // 2, on_first_metric=busy_cores)


def ctrl_c_at(proc: subprocess.Popen, run_dir: Path, step: int, on_first_metric=None) -> str:
    """Wait for a metric at ``step`` or past it (calling ``on_first_metric`` at the run's first);
    then Ctrl-C ``proc``'s process group, as a terminal does. Its stderr; nothing of it is left
    running."""
    from mosaic_core.events import metric_steps, read_events

    started, deadline = False, time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            steps = metric_steps(read_events(run_dir / "events.jsonl")) if (run_dir / "events.jsonl").exists() else []
            if steps and not started and on_first_metric is not None:
                on_first_metric()
            started = started or bool(steps)
            if steps and max(steps) >= step:
                break
            assert proc.poll() is None, f"the run ended before its stop: {proc.communicate()[1][-2000:]}"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.communicate(timeout=120)[1]  # the default grace period is 10 s; slack for the host
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


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


# `make test` runs the suite in three processes (pytest-xdist, `--dist loadscope`, scheduled here).
# Each test goes with its module, so a module's fixtures are made once and not once per process. A
# folder whose conftest has session fixtures that cost (training runs: tests/modes, analytics; a
# cluster: tests/slurm, whose cluster binds fixed ports, and tests/ray_launcher, written for one Ray
# cluster) goes whole, for the same reason; or its fixture is made once for every process
# (once_per_session: tests/algorithms' smoke runs, which its folder's modules share). The work is queued
# longest first (tests/durations.json, made by .ci/durations.py; WAITING_FIRST before all), so the last
# to finish is a short one. (xdist's own `loadgroup` would do the grouping, but does not on pytest 9.2:
# pytest-xdist#1386.)
# The other way round, a module whose tests share no costly fixture and that alone would outlast a
# lane's share of the work (the run contract's resumes: minutes each) is split, a test (each of its
# parameters) or a test class (its class fixtures) to a unit, so the processes share it.
ONE_PROCESS = {f"tests/{name}" for name in ("modes", "analytics", "slurm", "ray_launcher")}
# Scopes that mostly wait (Slurm's time-limit checks every 30 s, a requeued job's start) go first, whatever
# their seconds: their waits then overlap the other processes' work instead of ending the lane alone.
WAITING_FIRST = {"tests/slurm"}
SPLIT = {"tests/algorithms/test_run_contract.py"}
# The seconds each unit took: a module, or a test or class of a SPLIT module.
UNIT_SECONDS: dict[str, float] = json.loads((Path(__file__).parent / "durations.json").read_text())
UNKNOWN_SECONDS = 5.0  # a unit not in the table yet: a middling one


def xdist_unit(nodeid: str) -> str:
    """The unit ``nodeid`` is timed and scheduled with: its module, or for a SPLIT module ``module::test[param]``
    or ``module::Class``."""
    module, _, rest = nodeid.partition("::")
    return f"{module}::{rest.split('::')[0]}" if module in SPLIT and rest else module


def xdist_scope(nodeid: str) -> str:
    unit = xdist_unit(nodeid)
    folder = unit.rpartition("/")[0]
    return folder if folder in ONE_PROCESS else unit


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndFolders(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    config.option.loadscopereorder = False  # the queue is in the workers' order (below)
    return ModulesAndFolders(config, log)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):
        return  # not an xdist worker, whose collection order is the queue's
    units: dict[str, set[str]] = defaultdict(set)
    for item in items:
        units[xdist_scope(item.nodeid)].add(xdist_unit(item.nodeid))
    cost = {scope: sum(UNIT_SECONDS.get(u, UNKNOWN_SECONDS) for u in found) for scope, found in units.items()}

    def queued(item: pytest.Item) -> tuple[bool, float]:
        scope = xdist_scope(item.nodeid)
        return scope not in WAITING_FIRST, -cost[scope]

    items.sort(key=queued)  # stable: each scope's own order kept


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str, make, to_json, from_json):
    """``make()`` once for the whole test session, however many pytest-xdist processes ask: the
    first holds a lock while it makes the value and writes ``to_json(value)`` beside the processes'
    temp folders (the session's own); the others wait, then read ``from_json(...)`` back."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make()  # one process: its session fixture is once already
    kept = tmp_path_factory.getbasetemp().parent / f"{name}.json"  # pytest-N/, shared by this session's processes
    with open(f"{kept}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.is_file():
            return from_json(json.loads(kept.read_text()))
        value = make()
        kept.write_text(json.dumps(to_json(value)))
        return value
