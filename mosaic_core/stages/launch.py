"""Stage 4, launch: a prepared run started. Its directory and ``config.json`` (a resumed run's
``launch.json`` records the attempt instead), the follow stage's options and daemon session,
then the launcher its settings choose (the local Supervisor by default; :mod:`mosaic_core.launchers`).
From here on a signal cancels the run, which ends with one terminal event; a run refused before
it started leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from mosaic_core import hostsignals, launchers
from mosaic_core import resume as resuming
from mosaic_core.config import redact
from mosaic_core.errors import MosaicError
from mosaic_core.files import run_umask, write_json_atomic
from mosaic_core.plugins import PluginHost
from mosaic_core.stages import follow
from mosaic_core.stages.flags import HostOptions
from mosaic_core.stages.plan import Prepared


def execute(prepared: Prepared, ns: HostOptions, host: PluginHost, early: Any = None) -> int:
    """Start a prepared run (``early``: a launcher's slow start, begun while the run was prepared)."""
    _say_before(prepared, ns, host)
    options = follow.supervisor_options(prepared, ns)
    session = follow.daemon_session(prepared, ns, options)
    run = prepared.run
    directory = run.directory
    directory.check_usable(existing_ok=bool(run.resume or prepared.restart))  # again: time passed since the plan
    # Everything the run writes, the training process included, is private to its user (0700/
    # 0600) unless $MOSAIC_SHARE_RUNS=group lets the group read it.
    previous_umask = os.umask(run_umask())
    hostsignals.hold()  # from now on a signal cancels the run, which ends with a terminal event
    try:
        write_records(prepared)
        job = launchers.Job(
            run,
            host,
            list(prepared.launch.command),
            prepared.env,
            prepared.launch.cwd,
            options,
            dict(prepared.launcher.settings),
            rerun_argv=rerun_argv(prepared, ns),
            num_cpus=prepared.num_cpus,
            early=early,
            launcher=prepared.launcher,
        )
        return launchers.run_job(job)
    except MosaicError:
        if run.emitter is None and run.resume is None:  # refused before it started: leave nothing (a resumed run
            shutil.rmtree(directory.path, ignore_errors=True)  # keeps its directory as it was)
        raise
    except OSError as exc:
        if run.emitter is not None:
            raise
        if run.resume is None:
            shutil.rmtree(directory.path, ignore_errors=True)  # e.g. a full disk before the run started
        raise MosaicError(
            f"cannot write run {run.run_id}'s files under {directory.root}: {exc.strerror or exc}"
        ) from None
    finally:
        os.umask(previous_umask)
        if session is not None:
            session.close()


def _say_before(prepared: Prepared, ns: HostOptions, host: PluginHost) -> None:
    """Plugins that failed to load (named once, when the run starts; recorded in the manifest),
    then the worker's notes."""
    for item in host.load_failures():
        print(
            f"mosaic: warning: plugin {item.name!r} ({item.distribution} {item.version}) failed to load and is "
            f"not part of this run: {item.error}",
            file=sys.stderr,
        )
    for note in prepared.launch.notes:
        if not ns.quiet:
            print(f"mosaic: note: {note}", file=sys.stderr)


def write_records(prepared: Prepared) -> None:
    """The run directory and its records: ``config.json`` for a new run; a resumed run keeps its
    config and ``launch.json`` records the attempts; a restarted run's directory is cleared first."""
    run, launch, directory = prepared.run, prepared.launch, prepared.run.directory
    if prepared.restart and resuming.existing(directory.path):
        resuming.clear(directory.path)
    directory.create()
    record = {
        "worker": run.worker,
        "command": list(launch.command),
        "cwd": str(launch.cwd or run.run_dir),
        **launch.started_payload,
        "threads": prepared.threads.record() if prepared.threads else None,
    }
    if run.resume is None:
        directory.write_config(run.config, run.worker, record)
        return
    resuming.announce(run.run_id, run.resume)
    attempts = resuming.attempts(directory.launch, run.resume)
    write_json_atomic(directory.launch, redact({**record, "resume": run.resume.payload(), "attempts": attempts}))


def rerun_argv(prepared: Prepared, ns: HostOptions) -> list[str]:
    """The ``mosaic`` arguments that repeat this run elsewhere from its ``config.json`` (a
    launcher puts the file there and appends ``--config PATH --runs-dir DIR``): same run id,
    same worker flags, JSON events; secrets travel in the environment (``MOSAIC_SECRET_EXTRAS``)."""
    return [
        "run",
        "--worker",
        prepared.run.worker,
        "--run-id",
        prepared.config.run_id,
        "--json",
        "--quiet",
        "--heartbeat-interval",
        str(ns.heartbeat_interval),
        "--grace-period",
        str(ns.grace_period),
        *(["--num-cpus", str(prepared.num_cpus)] if prepared.num_cpus else []),
        *prepared.worker_argv,
    ]
