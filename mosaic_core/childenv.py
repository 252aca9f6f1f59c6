"""How a host describes a run to its training processes: the ``MOSAIC_CHILD`` variable.

A JSON object (run id, run dir, redacted extras, side-channel address, algo, env id, vector
width, worker) that every process of the run inherits. Kept apart from
:mod:`mosaic_core.child` (the patching code) so the host never imports that to start a run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from mosaic_core.channel import ChannelSender
from mosaic_core.types import ChildContext

CHILD_VAR = "MOSAIC_CHILD"
LIFECYCLE_KIND = "lifecycle"  # side-channel messages the host turns into lifecycle events
FAILURE_KIND = "plugin_failure"  # a plugin failed in the training process (HookFailure fields)
REFUSAL_KIND = "config_refused"  # the training process refused its config before its first step ({"error"})
# The seconds between the host's SIGTERM and its SIGKILL: a training process that checkpoints on a stop
# (contract.StopOnSignal) can end by itself before the SIGKILL.
GRACE_VAR = "MOSAIC_GRACE_PERIOD"


def describe_child(child: ChildContext) -> str:
    """The JSON a host puts in ``MOSAIC_CHILD`` for ``child``."""
    return child.describe()


def child_from_environ(environ: Mapping[str, str] | None = None) -> ChildContext | None:
    """The context described in ``MOSAIC_CHILD``, or None when not run by a MOSAIC host."""
    raw = (os.environ if environ is None else environ).get(CHILD_VAR)
    if not raw:
        return None
    spec = json.loads(raw)
    return ChildContext(
        run_id=spec["run_id"],
        run_dir=Path(spec["run_dir"]),
        extras=spec.get("extras") or {},
        channel=ChannelSender(spec.get("channel")),
        algo=spec.get("algo", ""),
        env_id=spec.get("env_id", ""),
        num_envs=spec.get("num_envs"),
        worker=spec.get("worker", ""),
        plugins=spec.get("plugins"),
        host_pid=int(spec.get("host_pid") or 0),
    )
