"""The ``TrainerService`` methods (gRPC servicer). Lifecycle and state live in
:mod:`mosaic_core.trainer.daemon`, runs in :mod:`mosaic_core.trainer.manager`.

Status codes: malformed request → INVALID_ARGUMENT naming the field; well formed but not
possible here (GPU asked on a CPU host, a script path the owner did not allow, wrong
protocol major, run already ended) → FAILED_PRECONDITION; unknown run → NOT_FOUND;
missing/wrong client token (checked in :mod:`mosaic_core.trainer.auth`), registration
secret or session token → UNAUTHENTICATED; a second worker for a run without its token →
ALREADY_EXISTS; too many open streams → RESOURCE_EXHAUSTED; the daemon shutting down →
UNAVAILABLE; ControlStream → UNIMPLEMENTED.

SubmitRun with ``--dry-run`` among ``metadata.worker.arguments`` validates and answers
(``dry_run``, ``summary_json``), storing and starting nothing. RegisterWorker for a run id this
daemon does not know, carrying the owner's client token, records an *attached* run
(:mod:`mosaic_core.trainer.attached`), whose program then reports its lifecycle (ReportRunEvent).

Telemetry (Publish*) is bound to the run whose session token it carries, each item capped in
size with its ``*_json`` fields strict JSON, capped per run (more is dropped and counted),
and refused once the run has ended.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import grpc

from mosaic_core.config import RUN_ID, parse_json
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.trainer import attached
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import REGISTRATION_ENV, REGISTRATION_METADATA, presented_token, secrets_match
from mosaic_core.trainer.protocol import TOKEN_METADATA, VersionError, negotiate
from mosaic_core.trainer.store import HSHK, INIT, RDY, DuplicateRun, RunEnded, RunRow, hash_token, token_matches
from mosaic_core.trainer.submission import PreconditionError, ScriptPolicy, Submission, parse_submission

if TYPE_CHECKING:
    from mosaic_core.entrypoints import LoadedEntryPoint
    from mosaic_core.trainer.manager import RunManager
    from mosaic_core.trainer.store import RunStore


class TrainerDaemon(Protocol):
    """What the servicer needs of its daemon (:class:`mosaic_core.trainer.daemon.TrainerDaemon`)."""

    store: RunStore | None
    manager: RunManager | None
    options: Any  # mosaic_core.trainer.daemon.DaemonOptions (the daemon imports this module)
    gpus: int
    closing: bool
    token: str | None  # the client token (None: --insecure)
    pid: int
    address: str
    started_at: float

    def workers(self, refresh: bool = False) -> list[LoadedEntryPoint]: ...


TELEMETRY_BATCH = 500
MAX_TELEMETRY_ITEM_BYTES = 256 * 1024  # one step or episode; frames travel by FastLane, not here
JSON_FIELDS = {
    "steps": ("action_json", "observation_json", "render_hint_json", "render_payload_json"),
    "episodes": ("metadata_json",),
}
WAIT_SLICE_S = 0.5
WORKER_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
Code = grpc.StatusCode


def _timestamp(target: Any, seconds: float | None) -> None:
    if seconds is not None:
        target.FromNanoseconds(int(seconds * 1e9))


def to_record(row: RunRow) -> pb.RunRecord:
    record = pb.RunRecord(
        run_id=row.run_id,
        status=cast("pb.RunStatus", row.status),  # an int: the generated stub takes only its enum's members
        digest=row.digest,
        seq_id=row.seq_id,
        terminal_event=row.terminal_event or "",
        worker=row.worker,
        run_dir=row.run_dir,
        metadata_json=row.metadata or "",
    )
    _timestamp(record.created_at, row.created_at)
    _timestamp(record.updated_at, row.updated_at)
    _timestamp(record.last_heartbeat, row.last_heartbeat)
    if row.failure_reason:
        record.failure_reason = row.failure_reason
    if row.exit_code is not None:
        record.exit_code = row.exit_code
    return record


def _metadata(context: grpc.ServicerContext, name: str) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value if isinstance(value, str) else None  # bytes only for the "-bin" keys, none of ours
    return None


def _token(context: grpc.ServicerContext) -> str | None:
    return _metadata(context, TOKEN_METADATA)


def check_item(message: Any, kind: str, index: int) -> str | None:
    """Why a telemetry item is refused (size, non-strict JSON), or None."""
    size = message.ByteSize()
    if size > MAX_TELEMETRY_ITEM_BYTES:
        return f"item {index} is {size} bytes; at most {MAX_TELEMETRY_ITEM_BYTES} per item"
    for name in JSON_FIELDS[kind]:
        text = getattr(message, name)
        if text:
            try:
                parse_json(text, name)
            except ConfigError as exc:
                return f"item {index}: {exc}"
    return None


class TrainerServicer(pb_grpc.TrainerServiceServicer):
    def __init__(self, daemon: TrainerDaemon):
        if daemon.store is None or daemon.manager is None:
            raise RuntimeError("the servicer needs the daemon's store and manager: start them first")
        self.daemon = daemon
        self.store: RunStore = daemon.store
        self.manager: RunManager = daemon.manager

    # ------------------------------------------------------------------ helpers
    def _run(self, run_id: str, context: grpc.ServicerContext) -> RunRow:
        if not run_id:
            context.abort(Code.INVALID_ARGUMENT, "run_id is required")
        row = self.store.get(run_id)
        if row is None:
            context.abort(Code.NOT_FOUND, f"run {run_id!r} was not submitted to this daemon")
        return row

    def _authorised(self, run_id: str, context: grpc.ServicerContext) -> RunRow:
        token = _token(context)
        if not token:
            context.abort(
                Code.UNAUTHENTICATED,
                f"a session token is required: send the one RegisterWorker returned as metadata {TOKEN_METADATA!r}",
            )
        row = self._run(run_id, context)
        if not token_matches(row, token):
            context.abort(
                Code.UNAUTHENTICATED, f"the session token does not belong to run {run_id!r}'s current training program"
            )
        return row

    def _wait(self, seq: int) -> None:
        with self.store.changed:
            if self.store.seq == seq and not self.daemon.closing:
                self.store.changed.wait(WAIT_SLICE_S)

    # ------------------------------------------------------------------ runs
    def SubmitRun(self, request: pb.SubmitRunRequest, context: grpc.ServicerContext) -> pb.SubmitRunResponse:
        if not self.manager.accepting:
            context.abort(Code.UNAVAILABLE, "the trainer daemon is shutting down and accepts no new runs")
        options = self.daemon.options
        try:
            submission = parse_submission(
                request.config_json,
                request.run_id,
                self.daemon.workers(),
                self.daemon.gpus,
                runs_dir=self.manager.runs_dir,
                scripts=ScriptPolicy(tuple(options.allow_scripts), options.allow_any_script),
                taken=lambda run_id: self.store.get(run_id) is not None,
                resumable=self.manager.resumable,
                target=self.manager.options.target,
            )
            if submission.dry_run:
                return self._dry_run(submission)
            row = self.manager.submit(submission)
        except UsageError as exc:
            context.abort(Code.INVALID_ARGUMENT, str(exc))
        except PreconditionError as exc:
            context.abort(Code.FAILED_PRECONDITION, str(exc))
        except DuplicateRun as exc:
            context.abort(
                Code.ALREADY_EXISTS,
                f"run {exc.args[0]!r} exists already (queued, running or completed); "
                "choose another run_id (an unfinished run resumes when submitted again)",
            )
        except (OSError, sqlite3.OperationalError) as exc:  # a full disk under the state dir
            context.abort(Code.RESOURCE_EXHAUSTED, f"cannot record the run: {getattr(exc, 'strerror', None) or exc}")
        for note in submission.notes:
            self.manager.options.log(f"run {row.run_id}: note: {note}")
        return pb.SubmitRunResponse(run_id=row.run_id, digest=row.digest, notes=submission.notes)

    def _dry_run(self, submission: Submission) -> pb.SubmitRunResponse:
        """A submission with ``--dry-run``: validated as the worker's CLI validates it, answered, never run."""
        run_id = submission.run_id
        self.manager.options.log(f"run {run_id}: dry run ok ({submission.worker}); nothing stored or started")
        return pb.SubmitRunResponse(
            run_id=run_id,
            digest=submission.digest,
            dry_run=True,
            summary_json=json.dumps(submission.summary, default=str),
            notes=submission.notes,
        )

    def CancelRun(self, request: pb.CancelRunRequest, context: grpc.ServicerContext) -> pb.CancelRunResponse:
        row = self._run(request.run_id, context)
        if row.final:
            context.abort(Code.FAILED_PRECONDITION, f"run {row.run_id!r} already ended ({row.terminal_event})")
        if row.attached:
            context.abort(
                Code.FAILED_PRECONDITION,
                f"run {row.run_id!r} is a training program started by hand that registered itself; this daemon "
                "has no process of it to stop: stop the program where it runs (Ctrl-C, or kill its pid)",
            )
        self.manager.cancel(row.run_id)
        remaining = context.time_remaining()
        limit = self.daemon.options.grace_period + 10.0
        self.manager.wait_final(row.run_id, min(limit, remaining - 0.5) if remaining is not None else limit)
        return pb.CancelRunResponse()

    def RemoveRun(self, request: pb.RemoveRunRequest, context: grpc.ServicerContext) -> pb.RemoveRunResponse:
        from mosaic_core.trainer.removal import RunStillActive

        row = self._run(request.run_id, context)
        try:
            freed = self.manager.remove(row.run_id)
        except RunStillActive as exc:
            context.abort(Code.FAILED_PRECONDITION, str(exc))
        except OSError as exc:
            context.abort(Code.INTERNAL, f"could not remove run {row.run_id!r}: {exc}")
        return pb.RemoveRunResponse(freed_bytes=freed)

    def ListRuns(self, request: pb.ListRunsRequest, context: grpc.ServicerContext) -> pb.ListRunsResponse:
        return pb.ListRunsResponse(runs=[to_record(r) for r in self.store.list(request.status_filter)])

    def WatchRuns(self, request: pb.WatchRunsRequest, context: grpc.ServicerContext) -> Iterator[pb.RunRecord]:
        wanted, seq = set(request.status_filter), request.since_seq
        while context.is_active() and not self.daemon.closing:
            rows = self.store.changed_since(seq)
            for row in rows:
                seq = row.seq_id
                if not wanted or row.status in wanted:
                    yield to_record(row)
            if not rows:
                self._wait(seq)

    # ------------------------------------------------------------------ workers
    def RegisterWorker(
        self, request: pb.RegisterWorkerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterWorkerResponse:
        if not request.run_id:
            context.abort(Code.INVALID_ARGUMENT, "run_id is required")
        try:
            accepted = negotiate(request.proto_version)
        except VersionError as exc:
            context.abort(Code.FAILED_PRECONDITION, str(exc))
        presented = _token(context)
        token = secrets.token_urlsafe(32)
        registration = _registration_record(request)
        with self.store.changed:  # the store's lock: check and replace as one step
            row = self.store.get(request.run_id)
            if row is None and self._owner(context):  # a training program its owner started by hand
                self._attach(request, context, token, registration)
                return pb.RegisterWorkerResponse(accepted_version=accepted, session_token=token, report_events=True)
            row = self._check_registration(row, request, context, presented)
            self.store.update(
                row.run_id,
                token_hash=hash_token(token),
                worker_id=request.worker_id or None,
                registration=registration,
                last_heartbeat=time.time(),
                status=RDY if row.status == HSHK else row.status,
            )
        return pb.RegisterWorkerResponse(accepted_version=accepted, session_token=token)

    def _check_registration(
        self,
        row: RunRow | None,
        request: pb.RegisterWorkerRequest,
        context: grpc.ServicerContext,
        presented: str | None,
    ) -> RunRow:
        """Abort a RegisterWorker for a run that has no training program to register (unknown,
        ended, queued, another worker's), without its process's secret, or replacing a registered
        program without its session token."""
        if row is None or row.final:  # the same answer: nobody learns whether or how a run ended
            context.abort(
                Code.NOT_FOUND,
                f"run {request.run_id!r} has no worker to register: it is not one of "
                "this daemon's runs, or it has ended",
            )
        if row.status == INIT:
            context.abort(
                Code.FAILED_PRECONDITION,
                f"run {row.run_id!r} is queued and has not started; its training program registers once the daemon starts it",
            )
        if request.worker_kind and request.worker_kind != row.worker:
            context.abort(
                Code.FAILED_PRECONDITION,
                f"run {row.run_id!r} was submitted for worker {row.worker!r}, not {request.worker_kind!r}",
            )
        if not row.token_hash and not self.manager.take_registration(
            row.run_id, _metadata(context, REGISTRATION_METADATA)
        ):
            context.abort(
                Code.UNAUTHENTICATED,
                f"run {row.run_id!r}: a first RegisterWorker needs the registration "
                f"secret the daemon gave the run's process (${REGISTRATION_ENV}), "
                f"as metadata {REGISTRATION_METADATA!r}",
            )
        if row.token_hash and not presented:
            context.abort(
                Code.ALREADY_EXISTS,
                f"run {row.run_id!r} already has a registered training program; to replace "
                f"it, present its session token as metadata {TOKEN_METADATA!r}",
            )
        if row.token_hash and not token_matches(row, presented):
            context.abort(
                Code.UNAUTHENTICATED,
                f"the session token does not belong to run {row.run_id!r}'s current training program",
            )
        return row

    def _owner(self, context: grpc.ServicerContext) -> bool:
        """Whether the call carries the daemon's client token (or the daemon takes calls without one)."""
        token = self.daemon.token
        return token is None or secrets_match(token, presented_token(context.invocation_metadata()))

    def _attach(
        self, request: pb.RegisterWorkerRequest, context: grpc.ServicerContext, token: str, registration: str
    ) -> None:
        if not self.manager.accepting:
            context.abort(Code.UNAVAILABLE, "the trainer daemon is shutting down and takes no new runs")
        if not RUN_ID.fullmatch(request.run_id):
            context.abort(
                Code.INVALID_ARGUMENT,
                f"run_id must be 1-128 letters, digits, '-' or '_', got {request.run_id!r}",
            )
        if not WORKER_KIND.fullmatch(request.worker_kind):
            context.abort(
                Code.INVALID_ARGUMENT,
                f"worker_kind must name the program's worker (letters, digits, ., _ or -), got {request.worker_kind!r}",
            )
        attached.attach(
            self.store,
            request.run_id,
            request.worker_kind,
            request.worker_id or None,
            registration,
            hash_token(token),
            self.manager.options.log,
        )

    def ReportRunEvent(self, request: pb.RunEventReport, context: grpc.ServicerContext) -> pb.RunEventReportResponse:
        row = self._authorised(request.run_id, context)
        if not row.attached:
            context.abort(
                Code.FAILED_PRECONDITION,
                f"run {row.run_id!r} was started by this daemon, which reads its events from its process",
            )
        if request.event not in attached.REPORTED:
            context.abort(
                Code.INVALID_ARGUMENT, f"event must be one of {', '.join(attached.REPORTED)}, got {request.event!r}"
            )
        if len(request.payload_json) > MAX_TELEMETRY_ITEM_BYTES:
            context.abort(Code.INVALID_ARGUMENT, f"payload_json is longer than {MAX_TELEMETRY_ITEM_BYTES} bytes")
        try:
            payload = parse_json(request.payload_json or "{}", "payload_json")
        except ConfigError as exc:
            context.abort(Code.INVALID_ARGUMENT, str(exc))
        if not isinstance(payload, dict):
            context.abort(Code.INVALID_ARGUMENT, "payload_json must be a JSON object")
        if not attached.report(self.store, row, request.event, payload, self.manager.options.log):
            context.abort(Code.FAILED_PRECONDITION, f"run {row.run_id!r} already ended")
        return pb.RunEventReportResponse()

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatResponse:
        row = self._authorised(request.run_id, context)
        if row.final or self.manager.heartbeat(row.run_id) is None:
            context.abort(Code.FAILED_PRECONDITION, f"run {row.run_id!r} already ended")
        return pb.HeartbeatResponse()

    def ControlStream(
        self, request_iterator: Iterator[pb.ControlEvent], context: grpc.ServicerContext
    ) -> Iterator[pb.ControlEvent]:
        context.abort(
            Code.UNIMPLEMENTED,
            "ControlStream (pause, resume, grant_steps, max_rate_hz) is not "
            "supported by this daemon; cancel a run with CancelRun",
        )

    def GetHealth(self, request: pb.HealthCheckRequest, context: grpc.ServicerContext) -> pb.HealthCheckResponse:
        daemon = self.daemon
        response = pb.HealthCheckResponse(
            pid=daemon.pid,
            listen_address=daemon.address,
            healthy=not daemon.closing,
            running=self.manager.running,
            queued=self.manager.queued,
            max_concurrent=daemon.options.max_concurrent,
            accepting=self.manager.accepting,
        )
        _timestamp(response.started_at, daemon.started_at)
        return response

    def ListWorkers(self, request: pb.ListWorkersRequest, context: grpc.ServicerContext) -> pb.ListWorkersResponse:
        items = self.daemon.workers(refresh=request.refresh)
        return pb.ListWorkersResponse(
            workers=[
                pb.WorkerInfo(
                    name=i.name,
                    status=i.status,
                    error=i.error or "",
                    distribution=i.distribution,
                    metadata_json=json.dumps(i.obj.to_dict()) if i.obj is not None else "",
                )
                for i in items
            ]
        )

    # ------------------------------------------------------------------ telemetry
    def PublishRunSteps(
        self, request_iterator: Iterator[pb.RunStep], context: grpc.ServicerContext
    ) -> pb.PublishTelemetryResponse:
        return self._publish(request_iterator, context, "steps")

    def PublishRunEpisodes(
        self, request_iterator: Iterator[pb.RunEpisode], context: grpc.ServicerContext
    ) -> pb.PublishTelemetryResponse:
        return self._publish(request_iterator, context, "episodes")

    def _publish(
        self, messages: Iterator[pb.RunStep | pb.RunEpisode], context: grpc.ServicerContext, kind: str
    ) -> pb.PublishTelemetryResponse:
        token = _token(context)
        row = self.store.get_by_token(hash_token(token)) if token else None
        if row is None:
            context.abort(
                Code.UNAUTHENTICATED,
                f"a session token is required: send the one RegisterWorker returned as metadata {TOKEN_METADATA!r}",
            )
        if row.final:
            context.abort(
                Code.FAILED_PRECONDITION,
                f"run {row.run_id!r} already ended ({row.terminal_event}); its telemetry is no longer recorded",
            )
        options = self.daemon.options
        batch: list[pb.RunStep | pb.RunEpisode] = []
        accepted = dropped = 0

        def flush() -> None:
            nonlocal accepted, dropped
            try:
                stored = self.store.append_telemetry(
                    row.run_id,
                    kind,
                    batch,
                    max_items=options.telemetry_items_per_run,
                    max_bytes=options.telemetry_bytes_per_run,
                )
            except RunEnded:
                context.abort(
                    Code.FAILED_PRECONDITION,
                    f"run {row.run_id!r} ended; its telemetry is no longer recorded ({accepted} items were)",
                )
            accepted, dropped = accepted + stored, dropped + len(batch) - stored
            batch.clear()

        for index, message in enumerate(messages):
            if message.run_id and message.run_id != row.run_id:
                context.abort(Code.UNAUTHENTICATED, f"the session token does not belong to run {message.run_id!r}")
            problem = check_item(message, kind, index)
            if problem:
                context.abort(
                    Code.INVALID_ARGUMENT, f"Publish{'RunSteps' if kind == 'steps' else 'RunEpisodes'}: {problem}"
                )
            message.run_id = row.run_id
            batch.append(message)
            if len(batch) >= TELEMETRY_BATCH:
                flush()
        if batch:
            flush()
        return pb.PublishTelemetryResponse(accepted=accepted, dropped=dropped)

    def StreamRunSteps(self, request: pb.StreamStepsRequest, context: grpc.ServicerContext) -> Iterator[pb.RunStep]:
        return self._stream(request, context, "steps", pb.RunStep)

    def StreamRunEpisodes(
        self, request: pb.StreamEpisodesRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.RunEpisode]:
        return self._stream(request, context, "episodes", pb.RunEpisode)

    def _stream(
        self,
        request: pb.StreamStepsRequest | pb.StreamEpisodesRequest,
        context: grpc.ServicerContext,
        kind: str,
        message_type: Any,
    ) -> Iterator[Any]:
        """Stored telemetry after ``since_seq``, then new items until the run has ended."""
        self._run(request.run_id, context)
        since = request.since_seq
        while context.is_active() and not self.daemon.closing:
            seen = self.store.seq
            row = self.store.get(request.run_id)
            ended = row is None or row.final  # None: removed meanwhile (RemoveRun), its telemetry with it
            items = self.store.read_telemetry(request.run_id, kind, since)
            for data in items:
                message = message_type.FromString(data)
                since = message.seq_id
                yield message
            if not items:
                if ended:
                    return
                self._wait(seen)


def _registration_record(request: pb.RegisterWorkerRequest) -> str:
    """What a RegisterWorker declares about its training program, as the store keeps it."""
    return json.dumps(
        {
            "worker_kind": request.worker_kind,
            "schema_id": request.schema_id,
            "schema_version": request.schema_version,
            "proto_version": request.proto_version,
            "supports_pause": request.supports_pause,
            "supports_checkpoint": request.supports_checkpoint,
        }
    )
