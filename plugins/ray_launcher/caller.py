"""The caller's side of a Ray run: connect, check, place, relay, bring the run directory back.

``execute(job)`` is the launcher (``mosaic_core.launchers``). Its steps:
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
import signal
import sys
import tarfile
import threading
import time
from typing import Any

from mosaic_core import (
    EVENT_OF,
    HOST_TERMINAL_FIELDS,
    STATUS_OF,
    TERMINAL,
    EventEmitter,
    MosaicError,
    prepared_env,
    procs,
    record_run_end,
    take_held_signals,
)
from mosaic_core.files import is_within, read_private_text
from mosaic_core.launchers import Job
from mosaic_core.toolkit import read_cancel_note, redact
from mosaic_ray import cluster
from mosaic_ray.remote import RemoteRun

POLL_S = 0.25
MANIFEST_LIMIT = 4 * 2**20  # the node's manifest.json, read back
CANCEL_EXTRA_S = 20.0  # after the grace period: the node's host needs a moment to record the end
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


class RayRun:
    def __init__(self, job: Job, settings: cluster.Settings, first_actor: Any = None):
        self.job, self.settings = job, settings
        self.first_actor = first_actor  # asked for while the run was prepared
        self.run = job.run
        self.cancel_reason: str | None = None
        self.cancel_signal = signal.SIGINT  # passed on to the node's `mosaic run` (a sweep prunes with SIGTERM)
        self.remote_dir: str | None = None
        self.started = False
        self.copied: dict[str, list[int]] = {}  # node files already here: path -> [size, mtime_ns] there
        self.resume_to_announce = job.run.resume  # run_resumed goes out when its attempt starts on a node

    # ------------------------------------------------------------------ main
    def execute(self) -> int:
        run, options = self.run, self.job.options
        emitter = EventEmitter(
            run.run_id,
            run.directory.events,
            stream=options.stream,
            sinks=[lambda record: self.job.host.on_event(run, record), *options.event_sinks],
            to_stream=options.json_stdout,
        )
        run.emitter = emitter
        if run.resume is not None:  # one log: this attempt's events number on from the earlier ones'
            emitter.continue_after(run.directory.events)
        previous = self._install_signal_handlers()
        status, payload, code = "failed", {}, 1
        try:
            for attempt in range(1, self.settings.retries + 2):
                try:
                    status, payload, code = self._attempt(attempt)
                    break
                except NodeLost as lost:
                    if attempt > self.settings.retries or self.cancel_reason is not None:
                        status, payload, code = "failed", {"error": str(lost)}, 1
                        break
                    restart = self._continue_from_checkpoint()
                    if self.started:
                        run.emit("run_retried", {"reason": str(lost), "attempt": attempt + 1, **restart})
                    lost_node = (run.state.get("ray") or {}).get("node_id")
                    if lost_node:  # until Ray knows, it may place the next attempt on the same dead node
                        cluster.wait_node_gone(lost_node, NODE_GONE_WAIT_S)
        except Exception as exc:  # a broken cluster mid-run: the run still ends with one terminal event
            status, payload, code = "failed", {"error": f"{type(exc).__name__}: {exc}"}, 1
        finally:
            self._restore_signal_handlers(previous)
            self._finish(status, payload)
            emitter.close()
        return code

    def _continue_from_checkpoint(self) -> dict[str, Any]:
        """The next attempt goes on from the newest checkpoint copied back (the run contract's
        resume); without a usable one it starts over. What ``run_retried`` says about it."""
        try:
            self.job.continue_from_checkpoint()
        except MosaicError as exc:  # no checkpoint came back (or none it can continue from)
            return {"starts_over": str(exc)}
        self.resume_to_announce = self.run.resume
        return {"resumes_from": self.run.resume.checkpoint.step}

    def _attempt(self, attempt: int) -> tuple[str, dict[str, Any], int]:
        settings, run = self.settings, self.run
        if attempt > 1:  # what fitted before may be gone with the node: say so rather than wait forever
            cluster.check_resources(settings)
        actor, self.first_actor = self.first_actor or new_actor(settings), None
        relays = Relays(self.job.host.run_relays(run.run_id, redact(run.config.extras), "caller"), self.job.host)
        try:
            runs_dir = str(cluster.staging_root(run)) if settings.shared_runs else None
            options = self.job.options
            start = actor.start.remote(
                run.directory.launch.read_text(encoding="utf-8"),
                self._config_text(),
                self._env(),
                runs_dir,
                run.run_id,
                settings.num_cpus,
                sorted(relays.relays),
                str(run.run_dir),
                [
                    "--heartbeat-interval",
                    f"{options.heartbeat_interval:g}",
                    "--grace-period",
                    f"{options.grace_period:g}",
                ],
                _checkpoint_tar(run.run_dir, run.resume.checkpoint.path) if run.resume is not None else b"",
            )
            node = self._wait(start, actor, "start")
            if node is None:  # cancelled while waiting for a node
                return "cancelled", {"reason": self._noted(self.cancel_reason)}, 130
            self.remote_dir = node.pop("run_dir")
            self.copied = node.pop("seeded", {})  # a new attempt: a new directory on its node (the checkpoint in it)
            node.pop("pid", None)
            node["attempt"] = attempt
            run.state["ray"] = node
            return self._relay_events(actor, node, relays)
        finally:
            relays.close()
            self._close(actor)

    def _relay_events(self, actor: Any, node: dict[str, Any], relays: Relays) -> tuple[str, dict[str, Any], int]:
        seen, terminal, cancel_sent, deadline = 0, None, False, None
        while True:
            if self.cancel_reason is not None and not cancel_sent:
                actor.cancel.remote(read_cancel_note(self.run.directory), int(self.cancel_signal))
                cancel_sent, deadline = True, time.monotonic() + self.job.options.grace_period + CANCEL_EXTRA_S
            marks = relays.due() if self.started else None  # plugins' live data: once the run started here
            reply = self._wait(actor.read.remote(seen, marks, POLL_S), actor, "read", cancellable=False)
            relays.deliver(reply.get("relayed") or {})
            relays.record_node_failures(reply.get("relay_failures") or {})
            seen += len(reply["lines"])
            for line in reply["lines"]:
                record = _parse(line)
                if record is None:
                    continue
                if record["event"] in TERMINAL:
                    terminal = record
                else:
                    self._relay_one(actor, record, node)
            if reply["returncode"] is not None:
                self._bring_back(actor)
                return self._outcome(terminal, reply)
            if deadline is not None and time.monotonic() > deadline:
                return (
                    "cancelled",
                    {"reason": self._noted(f"{self.cancel_reason}, the node did not confirm in time")},
                    130,
                )
            # no sleep: the read waited up to POLL_S for a line (a signal only sets cancel_reason)

    def _relay_one(self, actor: Any, record: dict[str, Any], node: dict[str, Any]) -> None:
        event, payload = record["event"], self._local_paths(record.get("payload") or {})
        if event == "run_started":
            where = f"{node['hostname']} {node['address']} ({node['node_id'][:12]})"
            payload = {**payload, "run_dir": str(self.run.run_dir), "ray": node, "node": where}
            if self.resume_to_announce is not None:  # as a local resume: run_resumed, then the attempt
                self.run.emit("run_resumed", self.resume_to_announce.payload())
                self.resume_to_announce = None
            if self.started:
                return  # a retry's second start: run_retried said so
            self.run.emit(event, payload)
            self.started = True
            self.job.host.run_started(self.run)
            return
        if event == "heartbeat" and self.job.options.heartbeat_extra:
            try:
                payload = {**payload, **(self.job.options.heartbeat_extra() or {})}
            except Exception as exc:  # e.g. the daemon went away: say so, keep relaying
                payload = {**payload, "heartbeat_error": f"{type(exc).__name__}: {exc}"}
        self.run.emit(event, payload)
        if event == "checkpoint_saved" and not self.settings.shared_runs:
            self._bring_back(actor)

    def _outcome(self, terminal: dict[str, Any] | None, reply: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
        code = reply["returncode"]
        if terminal is None:
            tail = "\n".join(reply.get("stderr_tail") or [])
            return (
                "failed",
                {"error": f"mosaic run on the node exited with code {code} without an end event", "stderr_tail": tail},
                code or 1,
            )
        status = STATUS_OF[terminal["event"]]
        return status, self._local_paths(terminal.get("payload") or {}), code if code is not None else 1

    # ------------------------------------------------------------------ the run directory
    def _bring_back(self, actor: Any) -> None:
        """The node's run directory into ours (files only; ``events.jsonl`` is ours)."""
        if self.settings.shared_runs:
            cluster.move_from_staging(self.run)
            return
        reply = self._wait(actor.snapshot.remote(self.copied), actor, "snapshot", cancellable=False)
        if not reply["tar"]:
            return
        target = self.run.run_dir
        with tarfile.open(fileobj=io.BytesIO(reply["tar"]), mode="r:gz") as tar:
            tar.extractall(target, filter="data")  # no links, nothing outside the run directory
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

    def _finish(self, status: str, payload: dict[str, Any]) -> None:
        run, host = self.run, self.job.host
        if not run.directory.manifest.exists():  # the node's manifest.json did not come back: write ours
            payload = record_run_end(run, host, status, payload, started=self.started)
        else:
            if self.started:
                host.run_finished(run, status)
            # The plugins' terminal fields (and the files they derive) made again from the node's
            # manifest, here: their paths are this host's, not the node's.
            fields = host.terminal_payload(run, status, self._node_manifest(), HOST_TERMINAL_FIELDS)
            payload = {**payload, **fields}
        run.emit(EVENT_OF[status], payload)
        if status == "failed" and not run.quiet and payload.get("error"):
            print(f"mosaic: error: run {run.run_id} failed: {payload['error']}", file=sys.stderr)

    def _node_manifest(self) -> dict[str, Any]:
        try:
            document = json.loads(read_private_text(self.run.directory.manifest, MANIFEST_LIMIT))
        except (OSError, ValueError):
            return {}
        return document if isinstance(document, dict) else {}

    # ------------------------------------------------------------------ what the node gets
    def _config_text(self) -> str:
        return self.run.directory.config.read_text(encoding="utf-8")

    def _env(self) -> dict[str, str]:
        """The run's environment on the node: the plan's and plugins' variables, the caller's
        variables named by ``--ray-env``, and the secret extras. Never written anywhere."""
        env = {k: v for k, v in self.job.env.items()}
        for name in self.settings.env_names:
            if name in os.environ:
                env[name] = os.environ[name]
        return prepared_env(env, self.run.config.extras)  # the secret extras, for the node's host

    # ------------------------------------------------------------------ Ray plumbing
    def _wait(self, ref: Any, actor: Any, what: str, cancellable: bool = True) -> Any:
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

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):  # the host's stop signals
            previous[sig] = signal.signal(sig, self._on_signal)
        held = take_held_signals()  # one that came after the run directory was made
        if held is not None:
            self._on_signal(held, None)
        return previous

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = f"received {signal.Signals(signum).name}"
            self.cancel_signal = signal.Signals(signum)

    def _noted(self, reason: str) -> str:
        """``reason`` after the run's cancel note, as a local run words it (a sweep's pruning)."""
        note = read_cancel_note(self.run.directory)
        return f"{note} ({reason})" if note else reason

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
