"""The caller's side of a Ray run: connect, check, place, relay, bring the run directory back.

``execute(job)`` is the launcher's (:class:`mosaic_ray.launcher.RayLauncher`); :class:`RayRun`
builds on the core caller (:class:`mosaic_core.caller.RemoteCaller`: the signals, the cancel,
the relay into this run's events and the one terminal event are the core's). Its steps:
1. (``start_early``, before the run is prepared) settings checked and the cluster reached
   (:mod:`mosaic_ray.cluster`): a bad value, an address that does not answer, a refused token,
   resources no alive node has: one line, exit 2; then the run's actor asked for, so its worker
   process starts on a node while the caller prepares the run;
2. the :class:`~mosaic_ray.remote.RemoteRun` actor with the run's resources starts ``mosaic run``
   on the node; its JSON events are emitted here as they come (the same events, in order, on
   stdout and in this run directory's ``events.jsonl``; plugins see them as for a local run),
   and what plugins relay (``mosaic_run_relay``: FastLane's frames, into this run's local
   segment) comes with them, at each plugin's rate;
3. the node's run directory comes back into ``job.run.run_dir`` at each ``checkpoint_saved`` and at
   the end (with ``--ray-shared-runs`` the node writes to the shared runs root and the directory
   is moved into place at the end);
4. Ctrl-C (SIGINT/SIGTERM/SIGHUP) cancels the run on the node; a node that dies has its run
   started again on another (``--ray-retries``), from the newest checkpoint copied back (the run
   contract's resume: ``run_resumed``, one history; the checkpoint goes to the new node with the
   run), else from the start; with no node left the run fails naming the node. A resumed run
   (``mosaic resume … --ray-address``) takes its checkpoint to its node the same way;
5. a ``mosaic`` process that ends with the run ends at once (``procs.ask_exit_at_once``): no Ray
   teardown, whose driver connection the raylet closes, ending the job and its actors.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import tarfile
import time
from typing import Any

from mosaic_core import MosaicError, prepared_env, procs
from mosaic_core.caller import Ending, Polled, RemoteCaller
from mosaic_core.files import is_within
from mosaic_core.launchers import Job
from mosaic_core.toolkit import read_cancel_note, redact
from mosaic_ray import cluster
from mosaic_ray.archives import unpack
from mosaic_ray.remote import RemoteRun

POLL_S = 0.25
NODE_GONE_WAIT_S = 60.0


class NodeLost(Exception):
    """The actor (its node, or its process) died."""


def execute(job: Job) -> int:
    started = job.early or start_early(job.settings, job.num_cpus)
    try:
        return RayRun(job, started.settings, started.take_actor()).execute()
    finally:
        started.close()


def start_early(raw: dict[str, Any], num_cpus: int | None) -> Started:
    """The launcher's ``start_early``: joined, checked, and the first attempt's actor asked for
    (its process starts on a node, about a second, while the caller prepares the run)."""
    return Started(cluster.Settings.parse(raw, num_cpus))


class Started:
    """This process as the cluster's driver, and an actor no attempt has taken yet."""

    def __init__(self, settings: cluster.Settings):
        self.settings = settings
        # A `mosaic` process that ends with the run leaves Ray's teardown to its exit (0.3-0.8 s:
        # ray.shutdown, its threads, the interpreter's): the raylet sees the driver go and ends its
        # job, the job's actors with it (ours is killed before that).
        self.ends_with_run = procs.may_exit_at_once()
        cluster.join(settings.address)
        self.joined = True
        if self.ends_with_run:
            procs.ask_exit_at_once()
        self.actor: Any = None
        try:
            cluster.check_resources(settings)
            self.actor = new_actor(settings)
        except BaseException:
            self.close()
            raise

    def take_actor(self) -> Any:
        actor, self.actor = self.actor, None
        return actor

    def close(self) -> None:
        import ray

        if self.actor is not None:  # the run never started (its preparation failed)
            with contextlib.suppress(Exception):  # a cluster gone meanwhile: the driver's end ends it
                ray.kill(self.actor)
            self.actor = None
        if self.joined and not self.ends_with_run:
            ray.shutdown()
        self.joined = False


def new_actor(settings: cluster.Settings) -> Any:
    """A :class:`RemoteRun` actor with the run's resources (Ray places it and starts its process)."""
    import ray

    return (
        ray.remote(RemoteRun)
        .options(
            num_cpus=settings.num_cpus,
            num_gpus=settings.num_gpus,
            resources=settings.resources or None,
            max_concurrency=4,
            max_restarts=0,
        )
        .remote()
    )


class RayRun(RemoteCaller):
    """One run on a node of the cluster; the core caller owns signals, cancel and the end."""

    def __init__(self, job: Job, settings: cluster.Settings, first_actor: Any = None):
        super().__init__(job)
        self.settings = settings
        self.first_actor = first_actor  # asked for while the run was prepared
        self.actor: Any = None
        self._relays: Relays | None = None  # the attempt's (``_attempt``)
        self.node: dict[str, Any] = {}
        self.remote_dir: str | None = None
        self.seen = 0  # lines of the node's log read so far
        self.copied: dict[str, list[int]] = {}  # node files already here: path -> [size, mtime_ns] there
        self.stderr_tail: list[str] = []  # the node's host's last lines of stderr, for a run that ended without an end

    def follow(self) -> Ending:
        """Attempts until one ends: a node that dies has the run go on elsewhere (``--ray-retries``)."""
        run = self.run
        for attempt in range(1, self.settings.retries + 2):
            try:
                return self._attempt(attempt)
            except NodeLost as lost:
                if attempt > self.settings.retries or self.cancel_reason is not None:
                    return Ending("failed", {"error": str(lost)}, 1)
                restart = self._continue_from_checkpoint()
                if self.remote_started:
                    run.emit("run_retried", {"reason": str(lost), "attempt": attempt + 1, **restart})
                lost_node = (run.state.get("ray") or {}).get("node_id")
                if lost_node:  # until Ray knows, it may place the next attempt on the same dead node
                    cluster.wait_node_gone(lost_node, NODE_GONE_WAIT_S)
        raise AssertionError("unreachable: the last attempt returns")

    def _attempt(self, attempt: int) -> Ending:
        if attempt > 1:  # what fitted before may be gone with the node: say so rather than wait forever
            cluster.check_resources(self.settings)
        self.actor, self.first_actor = self.first_actor or new_actor(self.settings), None
        self.node = {"attempt": attempt}
        self._relays = Relays(
            self.job.host.run_relays(self.run.run_id, redact(self.run.config.extras), "caller"), self.job.host
        )
        try:
            return super().follow()
        finally:
            self._relays.close()
            self._close(self.actor)

    @property
    def relays(self) -> Relays:
        """The plugins' relays of the attempt under way."""
        if self._relays is None:
            raise RuntimeError("no attempt under way: its relays are made as it starts")
        return self._relays

    def _continue_from_checkpoint(self) -> dict[str, Any]:
        """The next attempt goes on from the newest checkpoint copied back (the run contract's
        resume); without a usable one it starts over. What ``run_retried`` says about it."""
        try:
            self.job.continue_from_checkpoint()
        except MosaicError as exc:  # no checkpoint came back (or none it can continue from)
            return {"starts_over": str(exc)}
        return {"resumes_from": self.run.resume.checkpoint.step}  # the node's host says run_resumed

    # ------------------------------------------------------------------ the core caller's steps
    def start(self) -> Ending | None:
        settings, run, options = self.settings, self.run, self.job.options
        start = self.actor.start.remote(
            run.directory.launch.read_text(encoding="utf-8"),
            run.directory.config.read_text(encoding="utf-8"),
            self._env(),
            str(cluster.staging_root(run)) if settings.shared_runs else None,
            run.run_id,
            settings.num_cpus,
            sorted(self.relays.relays),
            str(run.run_dir),
            ["--heartbeat-interval", f"{options.heartbeat_interval:g}", "--grace-period", f"{options.grace_period:g}"],
            _checkpoint_tar(run.run_dir, run.resume.checkpoint.path) if run.resume is not None else b"",
        )
        node = self._wait(start, "start")
        if node is None:  # cancelled while waiting for a node
            return self.cancelled()
        self.remote_dir = node.pop("run_dir")
        self.copied = node.pop("seeded", {})  # a new attempt: a new directory on its node (the checkpoint in it)
        node.pop("pid", None)
        self.node = {**node, **self.node}
        self.seen = 0
        run.state["ray"] = self.node
        return None

    def poll(self) -> Polled:
        marks = self.relays.due() if self.hooks_started else None  # plugins' live data: once the run started here
        reply = self._wait(self.actor.read.remote(self.seen, marks, POLL_S), "read", cancellable=False)
        self.relays.deliver(reply.get("relayed") or {})
        self.relays.record_node_failures(reply.get("relay_failures") or {})
        self.seen += len(reply["lines"])
        self.stderr_tail = reply.get("stderr_tail") or []
        events = [record for record in map(_parse, reply["lines"]) if record is not None]
        if reply["returncode"] is not None:
            self._bring_back()
        return Polled(events, reply["returncode"])

    def cancel_remote(self, signum: int) -> None:
        self.actor.cancel.remote(read_cancel_note(self.run.directory), int(signum))

    def give_up(self) -> Ending:
        return self.cancelled("the node did not confirm in time")

    def no_end(self, exit_code: int) -> Ending:
        error = f"mosaic run on the node exited with code {exit_code} without an end event"
        return Ending("failed", {"error": error, "stderr_tail": "\n".join(self.stderr_tail)}, exit_code or 1)

    def relay(self, record: dict[str, Any]) -> None:
        event, payload = record["event"], self._local_paths(record.get("payload") or {})
        if event == "run_started":
            node = self.node
            where = f"{node['hostname']} {node['address']} ({node['node_id'][:12]})"
            if not self.hooks_started:  # a retry's second start: run_retried said so
                super().relay(
                    {
                        "event": event,
                        "payload": {**payload, "run_dir": str(self.run.run_dir), "ray": node, "node": where},
                    }
                )
            return
        if event == "heartbeat" and self.job.options.heartbeat_extra:
            try:
                payload = {**payload, **(self.job.options.heartbeat_extra() or {})}
            except Exception as exc:  # e.g. the daemon went away: say so, keep relaying
                payload = {**payload, "heartbeat_error": f"{type(exc).__name__}: {exc}"}
        self.run.emit(event, payload)
        if event == "checkpoint_saved" and not self.settings.shared_runs:
            self._bring_back()

    def end_payload(self, record: dict[str, Any]) -> dict[str, Any]:
        return self._local_paths(record.get("payload") or {})

    # ------------------------------------------------------------------ the run directory
    def _bring_back(self) -> None:
        """The node's run directory into ours (files only; ``events.jsonl`` is ours)."""
        if self.settings.shared_runs:
            cluster.move_from_staging(self.run)
            return
        reply = self._wait(self.actor.snapshot.remote(self.copied), "snapshot", cancellable=False)
        if not reply["tar"]:
            return
        unpack(reply["tar"], self.run.run_dir)  # no links, nothing outside the run directory
        self.copied.update(reply["files"])

    def _local_paths(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A path on the node inside its run directory, made the same path inside ours."""
        if not self.remote_dir:
            return payload
        out = {}
        for key, value in payload.items():
            if isinstance(value, str) and value.startswith(self.remote_dir) and is_within(self.remote_dir, value):
                value = str(self.run.run_dir / os.path.relpath(value, self.remote_dir))
            elif isinstance(value, dict):
                value = self._local_paths(value)
            out[key] = value
        return out

    def _env(self) -> dict[str, str]:
        """The run's environment on the node: the plan's and plugins' variables, the caller's
        variables named by ``--ray-env``, and the secret extras. Never written anywhere."""
        env = {k: v for k, v in self.job.env.items()}
        for name in self.settings.env_names:
            if name in os.environ:
                env[name] = os.environ[name]
        return prepared_env(env, self.run.config.extras)  # the secret extras, for the node's host

    # ------------------------------------------------------------------ Ray plumbing
    def _wait(self, ref: Any, what: str, cancellable: bool = True) -> Any:
        """``ray.get(ref)`` in short slices so a signal is noticed; a dead actor is NodeLost."""
        import ray

        while True:
            if cancellable and self.cancel_reason is not None:
                return None
            ready, _ = ray.wait([ref], timeout=POLL_S)
            if ready:
                try:
                    return ray.get(ref)
                except (
                    ray.exceptions.RayActorError,
                    ray.exceptions.NodeDiedError,
                    ray.exceptions.ObjectLostError,
                ) as exc:
                    raise NodeLost(cluster.describe_loss(self.run.state.get("ray"), exc)) from exc

    def _close(self, actor: Any) -> None:
        import ray

        try:
            ray.get(actor.close.remote(), timeout=15)
        except Exception:  # dead already, or stuck: the kill below ends it (and its run, PDEATHSIG)
            pass
        ray.kill(actor)


class Relays:
    """The caller's side of the plugins' relays (``mosaic_run_relay``), each asked at its rate."""

    def __init__(self, relays: dict[str, Any], host: Any = None):
        self.relays, self.host = relays, host  # host: where a relay's failure is recorded, as a hook's
        self.next_due = {plugin: 0.0 for plugin in relays}

    def due(self) -> dict[str, Any] | None:
        """The marks of the relays whose turn it is (None: none is due)."""
        now, marks = time.monotonic(), {}
        for plugin, relay in list(self.relays.items()):
            if now < self.next_due[plugin]:
                continue
            self.next_due[plugin] = now + 1.0 / max(float(relay.rate_hz), 0.1)
            mark = self._guarded(plugin, relay.mark, "mark")
            if mark is not None:
                marks[plugin] = mark
        return marks or None

    def deliver(self, relayed: dict[str, Any]) -> None:
        for plugin, items in relayed.items():
            relay = self.relays.get(plugin)
            if relay is not None and items:
                self._guarded(plugin, functools.partial(relay.deliver, items), "deliver")

    def record_node_failures(self, failures: dict[str, str]) -> None:
        """The node's side of a relay failed (``RemoteRun.read`` said so): recorded, and ours stops."""
        for plugin, error in failures.items():
            self._record(plugin, "collect", error, "node")
            if plugin in self.relays:
                self._drop(plugin)

    def _guarded(self, plugin: str, call: Any, what: str) -> Any:
        try:
            return call()
        except Exception as exc:  # isolate: that plugin's relay stops, the run and its events go on
            self._record(plugin, what, f"{type(exc).__name__}: {exc}", "caller")
            self._drop(plugin)
            return None

    def _record(self, plugin: str, what: str, error: str, where: str) -> None:
        """As a hook's failure: named once on stderr, listed in the manifest's plugin failures."""
        if self.host is not None:
            self.host.record_failure(plugin, f"mosaic_run_relay.{what}", error, where=where)

    def _drop(self, plugin: str) -> None:
        relay = self.relays.pop(plugin)
        with contextlib.suppress(Exception):
            relay.close()

    def close(self) -> None:
        for plugin in list(self.relays):
            self._drop(plugin)


def _checkpoint_tar(run_dir: Any, checkpoint: Any) -> bytes:
    """A checkpoint (a file, or a directory's files) as a gzip tar of paths relative to the run
    directory, for the node's copy of the run; links are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(
            checkpoint,
            arcname=os.path.relpath(checkpoint, run_dir),
            filter=lambda info: None if info.issym() or info.islnk() else info,
        )
    return buffer.getvalue()


def _parse(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("event"), str) else None
