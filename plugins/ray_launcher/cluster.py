"""Settings, connection and checks of the Ray launcher: each bad input is one line (UsageError,
exit 2) before anything runs on the cluster.

Auth: Ray 2.60 clusters use token auth (``RAY_AUTH_MODE=token``); the token comes from where Ray
reads it (``RAY_AUTH_TOKEN``, the file at ``RAY_AUTH_TOKEN_PATH``, or ``~/.ray/auth_token``). We
never print it, never pass it to a run, never write it anywhere.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError

CONNECT_TIMEOUT_S = 3.0
JOIN_TIMEOUT_S = 10.0
EXTRA_INSTALL = "pip install 'mosaic-rl[ray]'"
STAGING = ".ray-staging"  # under a shared runs root: the node's copy while the run lasts


@dataclass(frozen=True)
class Settings:
    address: str
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)
    env_names: tuple[str, ...] = ()
    shared_runs: bool = False
    retries: int = 1

    @classmethod
    def parse(cls, raw: dict[str, Any], run_cpus: int | None = None) -> Settings:
        address = str(raw.get("ray_address") or "").strip()
        host, _, port = address.removeprefix("ray://").rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(
                f"--ray-address {address!r}: expected HOST:PORT (the address `ray start --head` "
                "prints) or ray://HOST:PORT"
            )
        resources = _json_object(raw.get("ray_resources"))
        for name, amount in resources.items():
            if name in ("CPU", "GPU"):
                raise UsageError(f"--ray-resources: give {name} with --num-{name.lower()}s, not as a custom resource")
            if not isinstance(amount, (int, float)) or isinstance(amount, bool) or not amount > 0:
                raise UsageError(f"--ray-resources: {name!r} must be a positive number, got {amount!r}")
        names = tuple(n.strip() for n in str(raw.get("ray_env") or "").split(",") if n.strip())
        return cls(
            address=address,
            num_cpus=_number("--ray-num-cpus", raw.get("ray_num_cpus"), float(run_cpus or 1), minimum=0.0),
            num_gpus=_number("--num-gpus", raw.get("num_gpus"), 0.0, minimum=0.0),
            resources={k: float(v) for k, v in resources.items()},
            env_names=names,
            shared_runs=bool(raw.get("ray_shared_runs")),
            retries=int(_number("--ray-retries", raw.get("ray_retries"), 1, minimum=0, integer=True)),
        )

    def request(self) -> dict[str, float]:
        wanted = {"CPU": self.num_cpus, "GPU": self.num_gpus, **self.resources}
        return {k: v for k, v in wanted.items() if v > 0}


def validate(raw: dict[str, Any], num_cpus: int | None) -> list[str]:
    """The launcher's check before a run is prepared: settings well formed, the address answers
    (a TCP connect; joining is ``start_early``'s). No Ray import."""
    settings = Settings.parse(raw, num_cpus)
    problem = _answers(settings.address)
    if problem:
        return [f"Ray cluster at {settings.address} does not answer: {problem} (is `ray start --head` running there?)"]
    return []


def _number(flag: str, value: Any, default: float, minimum: float, integer: bool = False) -> float:
    if value in (None, ""):
        return default
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag} must be {'a whole number' if integer else 'a number'}, got {value!r}") from None
    if not math.isfinite(number) or number < minimum:
        raise UsageError(f"{flag} must be at least {minimum:g}, got {value!r}")
    return number


def _json_object(value: Any) -> dict[str, Any]:
    if value in (None, ""):
        return {}
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--ray-resources is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(data, dict):
        raise UsageError("--ray-resources must be a JSON object, e.g. '{\"nodeB\": 1}'")
    return data


def _answers(address: str) -> str | None:
    """Why nothing answers at HOST:PORT within a few seconds, or None."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            return None
    except TimeoutError:
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)


@contextlib.contextmanager
def connect(address: str) -> Iterator[None]:
    """Connected to the cluster as a driver for the block's duration (ray.shutdown after)."""
    join(address)
    try:
        yield
    finally:
        import ray

        ray.shutdown()


def join(address: str) -> None:
    """Join the cluster as this process's driver (:func:`connect` without the end)."""
    problem = _answers(address)
    if problem:
        raise UsageError(f"Ray cluster at {address} does not answer: {problem} (is `ray start --head` running there?)")
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray-address needs Ray, which is not installed here: {EXTRA_INSTALL}") from None
    logging.getLogger("ray").setLevel(logging.ERROR)
    failure = _init_within(ray, address, JOIN_TIMEOUT_S)
    if failure == "timeout":
        raise UsageError(
            f"Ray cluster at {address} does not answer as a Ray cluster within {JOIN_TIMEOUT_S:g} s "
            "(a GCS address is what `ray start --head` prints)"
        )
    if failure is not None:
        raise UsageError(f"cannot join the Ray cluster at {address}: {failure}")
    # The driver prints the cluster's error messages ("Raylet is terminated…") on stdout, which
    # carries our JSON events: the run reports a lost node itself (run_retried, run_failed).
    import ray._private.worker as ray_worker

    ray_worker._worker_logs_enabled = False


def _init_within(ray: Any, address: str, timeout: float) -> str | None:
    """``ray.init`` as a driver, given ``timeout`` seconds (Ray itself retries for minutes);
    None when joined, else why not in a few words."""
    outcome: dict[str, BaseException | None] = {}

    def join() -> None:
        try:
            ray.init(
                address=address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                namespace="mosaic",
                configure_logging=False,
                job_config=driver_job_config(address),
            )
            outcome["error"] = None
        except BaseException as exc:  # reported by the caller
            outcome["error"] = exc

    thread = threading.Thread(target=join, name="mosaic-ray-join", daemon=True)
    saved = os.dup(2)  # Ray's C++ core logs each retry straight to fd 2: keep that out of the user's way
    chatter = tempfile.TemporaryFile()
    os.dup2(chatter.fileno(), 2)
    try:
        thread.start()
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.5)
            if b"InvalidAuthToken" in os.pread(chatter.fileno(), 1 << 20, 0):
                break  # Ray would retry a refused token for minutes
    finally:
        if "error" in outcome:  # joined or refused: stderr as it was
            os.dup2(saved, 2)
            os.close(saved)
        else:  # Ray goes on retrying until we exit: its lines stay out, ours reach the real stderr
            sys.stderr = os.fdopen(saved, "w", buffering=1)
    chatter.seek(0)
    said = chatter.read().decode("utf-8", "replace")
    chatter.close()
    if "error" not in outcome:
        if "InvalidAuthToken" in said or "Unauthenticated" in said:
            return (
                "the cluster refused our token (token auth: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, "
                "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token must hold the cluster's token)"
            )
        return "timeout"
    exc = outcome["error"]
    if exc is None:
        return None
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ConnectionError) or "auth" in text.lower() or "token" in text.lower():
        return (
            "the cluster refused us: wrong or missing token? (token auth: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, "
            "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
        )
    return f"{type(exc).__name__}: {_first_line(exc)}"


def driver_job_config(address: str) -> Any:
    """Our driver's job config: it gives the cluster's workers no folder of ours. Ray's driver
    otherwise puts its cwd and its script's folder first on every worker's sys.path (the job's
    ``_py_driver_sys_path``, filled in ``ray._private.worker.connect``): a ``mosaic_ray/`` planted
    where the caller stands (``/tmp``), or at that path on another node, would be imported by the
    run's actor as the cluster's user. Through Ray Client (``ray://``) the server adds neither and
    the config travels pickled: Ray's default then."""
    if address.startswith("ray://"):
        return None
    from ray.job_config import JobConfig

    class WithoutDriverPaths(JobConfig):
        @property
        def _py_driver_sys_path(self) -> list[str]:
            return []  # what Ray extends is a new list each time: nothing reaches the job

        @_py_driver_sys_path.setter
        def _py_driver_sys_path(self, _paths: list[str]) -> None:
            pass

    return WithoutDriverPaths()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [node for node in ray.nodes() if node.get("Alive")]


def wait_node_gone(node_id: str, timeout: float) -> None:
    """Until Ray marks ``node_id`` dead (or ``timeout`` s): a retry must not land on it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(n["NodeID"] == node_id for n in alive_nodes()):
        time.sleep(1.0)


def check_resources(settings: Settings) -> None:
    """Refuse at submit a request no alive node could ever meet (Ray would wait forever)."""
    wanted = settings.request()
    nodes = alive_nodes()
    for node in nodes:
        have = node.get("Resources") or {}
        if all(have.get(name, 0) >= amount for name, amount in wanted.items()):
            return
    described = "; ".join(
        f"{n.get('NodeManagerAddress')} {n['NodeID'][:8]}: "
        + ", ".join(
            f"{k}={v:g}"
            for k, v in sorted((n.get("Resources") or {}).items())
            if k in ("CPU", "GPU") or not (k.startswith("node:") or k.endswith("memory"))
        )
        for n in nodes
    )
    asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
    raise UsageError(
        f"no node of the Ray cluster at {settings.address} has {asked} (nodes: {described or 'none alive'})"
    )


def capacity(raw: dict[str, Any]) -> tuple[int, str]:
    """How many runs with these settings the cluster's alive nodes hold at once, and why: the
    sum over nodes of the runs each fits (a sweep's default ``--parallel``)."""
    settings = Settings.parse(raw)
    with connect(settings.address):
        check_resources(settings)
        nodes = alive_nodes()
    wanted = settings.request()
    runs = sum(_runs_fitting(node.get("Resources") or {}, wanted) for node in nodes)
    cpus = sum((node.get("Resources") or {}).get("CPU", 0) for node in nodes)
    asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items()) or "nothing"
    return runs, (
        f"the Ray cluster at {settings.address} holds {runs} run(s) at a time: {len(nodes)} node(s), "
        f"{cpus:g} CPUs, each run asks {asked} (--ray-num-cpus, --num-gpus, --ray-resources)"
    )


def _runs_fitting(have: dict[str, float], wanted: dict[str, float]) -> int:
    if not wanted:  # a run that asks for nothing: one per CPU
        return max(1, int(have.get("CPU", 1)))
    return min(int(have.get(name, 0) // amount) for name, amount in wanted.items())


def describe_loss(node: dict[str, Any] | None, exc: BaseException) -> str:
    where = f"Ray node {node['node_id'][:12]} ({node['address']})" if node else "the Ray actor before it started"
    return f"{where} was lost: {type(exc).__name__}: {_first_line(exc)}"


def staging_root(run: Any) -> Path:
    """With --ray-shared-runs: the runs root the node writes this run into (beside ours)."""
    return run.directory.root / STAGING / run.run_id


def move_from_staging(run: Any) -> None:
    """Shared storage: move the node's files into our run directory (``events.jsonl`` is ours)."""
    staged = staging_root(run)
    source = staged / run.run_id
    if source.is_dir():
        for entry in sorted(source.rglob("*")):
            rel = entry.relative_to(source)
            target = run.run_dir / rel
            if str(rel) == "events.jsonl" or entry.is_symlink():
                continue
            if entry.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(entry, target)
    shutil.rmtree(staged, ignore_errors=True)
    with contextlib.suppress(OSError):
        staged.parent.rmdir()  # the staging root, once no run uses it
