"""The follow stage: how the host follows a launched run, set before it starts. The supervisor's
options (heartbeats, the grace period, what the ``started`` event carries) and, with ``--grpc``,
the run's session with a trainer daemon (it registers, then hears every event and heartbeat)."""

from __future__ import annotations

import os
from typing import Any

from mosaic_core.config import run_metadata
from mosaic_core.stages.flags import HostOptions
from mosaic_core.stages.plan import Prepared


def supervisor_options(prepared: Prepared, ns: HostOptions) -> Any:
    """The :class:`~mosaic_core.supervisor.SupervisorOptions` of the run (``run.human`` set too)."""
    from mosaic_core.supervisor import SupervisorOptions

    run, launch = prepared.run, prepared.launch
    run.human = not ns.json and not launch.passthrough_stdio
    return SupervisorOptions(
        heartbeat_interval=ns.heartbeat_interval,
        grace_period=ns.grace_period,
        passthrough_stdio=launch.passthrough_stdio,
        num_envs=launch.num_envs,
        started_payload={**launch.started_payload, **run_metadata(run.config)},
        json_stdout=ns.json,
    )


def daemon_session(prepared: Prepared, ns: HostOptions, options: Any) -> Any:
    """With ``--grpc``: the run's session with the daemon, its heartbeats and events wired into
    ``options``; else None. The caller closes it."""
    if not ns.grpc:
        return None
    session = register(prepared, ns.grpc_target, ns.token_file)
    options.heartbeat_extra = lambda: {"grpc_heartbeat": session.heartbeat()}
    options.event_sinks.append(session.report_event)  # a daemon that did not start the run hears of it
    options.started_payload["grpc"] = {"target": ns.grpc_target, "accepted_version": session.accepted_version}
    return session


def register(prepared: Prepared, target: str, token_file: str | None = None) -> Any:
    """The run's RegisterWorker: with the secret a daemon gave the process it started, else (a
    run started by hand) with the daemon's client token, found as every ``mosaic`` call finds it."""
    from mosaic_core.trainer.auth import REGISTRATION_ENV, find_token
    from mosaic_core.trainer.client import RunSession

    config, worker = prepared.config, prepared.run.worker
    extras = config.extras
    secret = os.environ.pop(REGISTRATION_ENV, None)  # a daemon-spawned run's proof, read once
    return RunSession.register(
        target,
        run_id=config.run_id,
        worker_id=config.worker_id or f"{worker}-worker-{config.run_id[:8]}",
        worker_kind=worker,
        schema_id=str(extras.get("schema_id") or f"{worker}.{config.algo}"),
        schema_version=int(extras.get("schema_version") or 1),
        supports_pause=bool(extras.get("supports_pause", False)),
        supports_checkpoint=bool(extras.get("supports_checkpoint", True)),
        registration_secret=secret,
        client_token=None if secret else find_token(token_file),
    )
