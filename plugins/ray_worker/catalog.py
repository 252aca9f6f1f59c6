"""What the RLlib worker runs, as the host sees it (import-light: no ray, torch or gymnasium 1.x).

Whether an env id exists and whether ``extras.algo_params`` names options of the algorithm's
config is RLlib's and gymnasium's to say: :func:`ask_configs` runs :mod:`ray_worker.configs`
in the worker's environment (one short subprocess, before anything starts).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from mosaic_core import ConfigError

# MOSAIC's name (RLlib's) -> what it is; each trains on RLlib's new API stack.
ALGORITHMS = {
    "PPO": "Proximal Policy Optimization (on-policy; discrete and continuous actions)",
    "APPO": "Asynchronous PPO (on-policy, V-trace; discrete and continuous actions)",
    "IMPALA": "IMPALA (asynchronous actor-critic, V-trace; discrete and continuous actions)",
    "DQN": "Rainbow-capable DQN (off-policy; discrete actions)",
    "SAC": "Soft Actor-Critic (off-policy; continuous and discrete actions)",
}
# RLlib's other algorithms: named when asked for, with what this worker runs instead.
OTHER_RLLIB = ("BC", "MARWIL", "CQL", "IQL", "DreamerV3", "TQC")
CONNECT_TIMEOUT_S = 3.0
LOCAL_CLUSTER_MIN_CPUS = 2  # the driver's learner and one env runner


def local_cluster_cpus() -> int:
    """The CPUs of a run's own local Ray cluster: those this process may use, at least two."""
    from mosaic_core import share

    return max(LOCAL_CLUSTER_MIN_CPUS, share(1))


def not_run_here(name: str) -> str | None:
    """Why an RLlib algorithm this worker does not run is not run (the host's rule has named
    the ones it runs)."""
    if name.casefold() in {other.casefold() for other in OTHER_RLLIB}:
        return f"{name} is an RLlib algorithm this worker does not run (offline or model-based)"
    return None


def ray_address(extras: dict[str, Any]) -> str | None:
    """The cluster to join: ``extras.ray_address``, else ``$RAY_ADDRESS``; None: a local cluster of
    the run's own (``"local"`` also means that)."""
    value = extras.get("ray_address", os.environ.get("RAY_ADDRESS") or None)
    if value is None or value == "local":
        return None
    if not isinstance(value, str) or value.count(":") < 1:
        raise ConfigError(
            f'extras.ray_address must be HOST:PORT (or ray://HOST:PORT, or "local"), got {value!r}',
            field="extras.ray_address",
        )
    if value == "auto":
        raise ConfigError(
            "extras.ray_address 'auto' attaches to whatever cluster is recorded on this machine; "
            'name its HOST:PORT (or "local" for a cluster of the run\'s own)',
            field="extras.ray_address",
        )
    return value


def check_answers(address: str) -> None:
    """A ConfigError unless something answers at the cluster's HOST:PORT within a few seconds."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            return
    except TimeoutError:
        problem = f"no answer within {CONNECT_TIMEOUT_S:g} s"
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
    raise ConfigError(
        f"Ray cluster at {address} does not answer: {problem} (extras.ray_address / $RAY_ADDRESS; "
        "is `ray start --head` running there?)",
        field="extras.ray_address",
    )


def ask_configs(python: str, args: list[str]) -> dict[str, Any]:
    """``python -m ray_worker.configs ARGS`` in the worker's environment: its JSON answer (one that
    found no problem is remembered there, mosaic_core.ask_environment)."""
    from mosaic_core import ask_environment
    from mosaic_core.toolkit import said_if_slow

    with said_if_slow("checking the run in the rllib worker's environment (its Python imports Ray RLlib)"):
        return ask_environment(python, "ray_worker.configs", args, worker="rllib", remember=True)
