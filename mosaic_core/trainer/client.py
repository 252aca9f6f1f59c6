"""Talking to a trainer daemon: a run's handshake (:class:`RunSession`; the wire calls it
RegisterWorker, the registering training program the "worker") and the calls
behind ``mosaic submit / cancel / runs --target``.

Every call has a deadline; channels use 64 MiB message limits. The CLI's calls send the
daemon's client token (``authorization: Bearer``; ``token=None`` finds it as
:func:`mosaic_core.trainer.auth.find_token` does); a training program's calls send its registration
secret, then its session token (``x-mosaic-session-token``). Errors become :class:`MosaicError` with one clear
line (a :class:`UsageError`, exit 2, when the daemon says the request itself is invalid).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

import grpc

from mosaic_core.errors import MosaicError, UsageError
from mosaic_core.jsontext import dumps
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer import trainer_pb2_grpc as pb_grpc
from mosaic_core.trainer.auth import REGISTRATION_METADATA, bearer, find_token
from mosaic_core.trainer.protocol import CHANNEL_OPTIONS, PROTO_VERSION, TOKEN_METADATA, check_target, status_name

__all__ = [
    "BACKOFF_S",
    "RETRYABLE",
    "RunSession",
    "USAGE_CODES",
    "WorkerSession",
    "cancel",
    "health",
    "list_runs",
    "list_workers",
    "open_channel",
    "print_runs",
    "record_to_dict",
    "remove_run",
    "rpc_error",
    "submit",
    "watch_runs",
]

RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
USAGE_CODES = (  # the request or its credential is for the caller to fix: exit code 2
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
)
BACKOFF_S = 0.2  # doubled after each failed try


def open_channel(target: str, what: str = "--target") -> grpc.Channel:
    check_target(target, what)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def _details(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error.details()}"


def _unanswered(target: str, what: str, error: grpc.RpcError) -> MosaicError:
    """A daemon that is not there refuses the connection at once (UNAVAILABLE); one that missed
    the deadline is there but busy or stuck: the two are told apart."""
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return MosaicError(
            f"the trainer daemon at {target} did not answer {what} before its deadline ({_details(error)}): "
            "it is busy or stuck, not absent"
        )
    return MosaicError(f"no trainer daemon answered at {target} ({what}): {_details(error)}")


def rpc_error(target: str, what: str, error: grpc.RpcError) -> MosaicError:
    """One clear line for a failed call."""
    code = error.code()
    if code in RETRYABLE:
        return _unanswered(target, what, error)
    cls = UsageError if code in USAGE_CODES else MosaicError
    return cls(f"trainer daemon at {target} refused {what}: {_details(error)}")


class RunSession:
    """A run's training program registered with a daemon: ``session_token`` and ``accepted_version``;
    ``report_events``: the daemon does not read this program's stdout (it was started by hand) and
    asks for its lifecycle events (:meth:`report_event`)."""

    def __init__(
        self,
        target: str,
        channel: grpc.Channel,
        run_id: str,
        session_token: str,
        accepted_version: str,
        timeout: float,
        report_events: bool = False,
    ):
        self.target, self.run_id, self.timeout = target, run_id, timeout
        self.session_token, self.accepted_version = session_token, accepted_version
        self.report_events = report_events
        self._channel = channel
        self._stub = pb_grpc.TrainerServiceStub(channel)

    @classmethod
    def register(
        cls,
        target: str,
        *,
        run_id: str,
        worker_id: str = "",
        worker_kind: str = "",
        schema_id: str = "",
        schema_version: int = 1,
        supports_pause: bool = False,
        supports_checkpoint: bool = False,
        timeout: float = 5.0,
        retries: int = 3,
        session_token: str | None = None,
        registration_secret: str | None = None,
        client_token: str | None = None,
    ) -> RunSession:
        """Send RegisterWorker (proto_version MOSAIC/1.0), retrying an unreachable daemon
        ``retries`` times with backoff. ``registration_secret``: the one the daemon gave the
        run in its environment (a first registration needs it); ``session_token``: the run's
        current token, to replace its registered program; ``client_token``: the daemon's client
        token, with which a program started by hand registers a run of its own. ``worker_id``:
        the training program's name; ``worker_kind``: the worker the run trains through."""
        channel = open_channel(target, "--grpc-target")
        stub = pb_grpc.TrainerServiceStub(channel)
        request = pb.RegisterWorkerRequest(
            run_id=run_id,
            worker_id=worker_id,
            worker_kind=worker_kind,
            proto_version=PROTO_VERSION,
            schema_id=schema_id,
            schema_version=schema_version,
            supports_pause=supports_pause,
            supports_checkpoint=supports_checkpoint,
        )
        metadata = [(TOKEN_METADATA, session_token)] if session_token else []
        if registration_secret:
            metadata.append((REGISTRATION_METADATA, registration_secret))
        metadata += bearer(client_token)
        reply = _register_retrying(stub, channel, request, metadata, target, timeout, max(1, retries))
        return cls(target, channel, run_id, reply.session_token, reply.accepted_version, timeout, reply.report_events)

    @property
    def metadata(self) -> list[tuple[str, str]]:
        return [(TOKEN_METADATA, self.session_token)]

    def heartbeat(self) -> dict[str, Any]:
        """One Heartbeat; never raises (a daemon hiccup must not stop training)."""
        try:
            self._stub.Heartbeat(pb.HeartbeatRequest(run_id=self.run_id), timeout=self.timeout, metadata=self.metadata)
            return {"ok": True}
        except grpc.RpcError as exc:
            return {"ok": False, "error": _details(exc)}

    def report_event(self, record: dict[str, Any]) -> None:
        """Tell the daemon of a lifecycle event it asked for (``report_events``: ``run_started``
        and the terminal event); never raises (the run's own events.jsonl keeps it anyway)."""
        from mosaic_core.trainer.attached import REPORTED

        if not self.report_events or record.get("event") not in REPORTED:
            return
        report = pb.RunEventReport(
            run_id=self.run_id, event=record["event"], payload_json=json.dumps(record.get("payload") or {}, default=str)
        )
        try:
            self._stub.ReportRunEvent(report, timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as exc:
            print(
                f"mosaic: warning: could not tell the trainer daemon of {record['event']}: {_details(exc)}",
                file=sys.stderr,
            )

    def publish_steps(self, steps: Iterable[pb.RunStep]) -> pb.PublishTelemetryResponse:
        return self._publish(self._stub.PublishRunSteps, steps, "PublishRunSteps")

    def publish_episodes(self, episodes: Iterable[pb.RunEpisode]) -> pb.PublishTelemetryResponse:
        return self._publish(self._stub.PublishRunEpisodes, episodes, "PublishRunEpisodes")

    def _publish(self, method: Any, items: Iterable[Any], what: str) -> pb.PublishTelemetryResponse:
        try:
            reply: pb.PublishTelemetryResponse = method(
                iter(items), timeout=max(self.timeout, 30.0), metadata=self.metadata
            )
            return reply
        except grpc.RpcError as exc:
            raise rpc_error(self.target, what, exc) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> RunSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------- CLI side
WorkerSession = RunSession  # its name before "worker" meant only the RL adapter (docs/glossary.md)


def _credential(token: str | None) -> list[tuple[str, str]]:
    return bearer(token if token is not None else find_token())


def _call(
    target: str, method: str, request: Any, timeout: float, what: str | None = None, token: str | None = None
) -> Any:
    metadata = _credential(token)
    with open_channel(target) as channel:
        stub = pb_grpc.TrainerServiceStub(channel)
        try:
            return getattr(stub, method)(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise rpc_error(target, what or method, exc) from None


def submit(
    target: str, config_json: str, run_id: str = "", timeout: float = 10.0, token: str | None = None
) -> pb.SubmitRunResponse:
    reply: pb.SubmitRunResponse = _call(
        target, "SubmitRun", pb.SubmitRunRequest(run_id=run_id, config_json=config_json), timeout, token=token
    )
    return reply


def cancel(target: str, run_id: str, timeout: float = 30.0, token: str | None = None) -> None:
    _call(
        target, "CancelRun", pb.CancelRunRequest(run_id=run_id), timeout, f"CancelRun for run {run_id!r}", token=token
    )


def remove_run(target: str, run_id: str, timeout: float = 60.0, token: str | None = None) -> int:
    """Delete an ended run on the daemon; the bytes its files took."""
    reply: pb.RemoveRunResponse = _call(
        target, "RemoveRun", pb.RemoveRunRequest(run_id=run_id), timeout, f"RemoveRun for run {run_id!r}", token=token
    )
    return reply.freed_bytes


def list_runs(
    target: str, statuses: Iterable[pb.RunStatus] = (), timeout: float = 10.0, token: str | None = None
) -> list[pb.RunRecord]:
    return list(_call(target, "ListRuns", pb.ListRunsRequest(status_filter=list(statuses)), timeout, token=token).runs)


def health(target: str, timeout: float = 5.0, token: str | None = None) -> pb.HealthCheckResponse:
    """GetHealth needs no credential, but carries the client token when the caller has one: a
    call with it is the owner's and is served outside the small budget for calls without one,
    which others can fill (a wrong or stale token is answered like no token)."""
    reply: pb.HealthCheckResponse = _call(target, "GetHealth", pb.HealthCheckRequest(), timeout, token=token)
    return reply


def list_workers(
    target: str, refresh: bool = False, timeout: float = 30.0, token: str | None = None
) -> list[pb.WorkerInfo]:
    return list(_call(target, "ListWorkers", pb.ListWorkersRequest(refresh=refresh), timeout, token=token).workers)


def watch_runs(
    target: str,
    statuses: Iterable[pb.RunStatus] = (),
    since_seq: int = 0,
    timeout: float | None = None,
    token: str | None = None,
) -> Iterator[pb.RunRecord]:
    """RunRecord updates as they happen (``timeout``: end the stream after that many seconds)."""
    metadata = _credential(token)
    with open_channel(target) as channel:
        stream = pb_grpc.TrainerServiceStub(channel).WatchRuns(
            pb.WatchRunsRequest(status_filter=list(statuses), since_seq=since_seq), timeout=timeout, metadata=metadata
        )
        try:
            yield from stream
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED or timeout is None:
                raise rpc_error(target, "WatchRuns", exc) from None
        finally:
            stream.cancel()


def record_to_dict(record: pb.RunRecord) -> dict[str, Any]:
    def seconds(ts: Any) -> float | None:
        return ts.ToNanoseconds() / 1e9 if ts.seconds or ts.nanos else None

    return {
        "run_id": record.run_id,
        "status": status_name(record.status),
        "worker": record.worker,
        "digest": record.digest,
        "created_at": seconds(record.created_at),
        "updated_at": seconds(record.updated_at),
        "last_heartbeat": seconds(record.last_heartbeat),
        "failure_reason": record.failure_reason if record.HasField("failure_reason") else None,
        "terminal_event": record.terminal_event or None,
        "exit_code": record.exit_code if record.HasField("exit_code") else None,
        "run_dir": record.run_dir or None,
        "metadata": json.loads(record.metadata_json) if record.metadata_json else {},
        "seq_id": record.seq_id,
    }


def print_runs(target: str, as_json: bool, token: str | None = None) -> int:
    """Print the daemon's runs (a table, or a JSON list); returns the exit code."""
    runs = [record_to_dict(r) for r in list_runs(target, token=token)]
    if as_json:
        print(dumps(runs, indent=2))
        return 0
    from rich.table import Table

    from mosaic_core.cli.console import console

    table = Table(title=f"runs at {target}")
    for column in ("run", "worker", "status", "ended with", "updated", "reason"):
        table.add_column(column)
    for run in runs:
        updated = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["updated_at"])) if run["updated_at"] else ""
        table.add_row(
            run["run_id"],
            run["worker"],
            run["status"],
            run["terminal_event"] or "",
            updated,
            run["failure_reason"] or "",
        )
    console(sys.stdout).print(table)
    return 0


def _register_retrying(
    stub: Any,
    channel: grpc.Channel,
    request: Any,
    metadata: list[tuple[str, str]],
    target: str,
    timeout: float,
    tries: int,
) -> Any:
    """The RegisterWorker reply, an unreachable daemon tried ``tries`` times with backoff; the
    channel is closed when it fails."""
    last: grpc.RpcError | None = None
    for attempt in range(tries):
        try:
            return stub.RegisterWorker(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            last = exc
            if exc.code() not in RETRYABLE:
                channel.close()
                raise rpc_error(target, f"RegisterWorker for run {request.run_id!r}", exc) from None
        if attempt + 1 < tries:
            time.sleep(BACKOFF_S * 2**attempt)
    channel.close()
    assert last is not None  # at least one try, and each one that did not return failed with an RpcError
    raise _unanswered(target, f"RegisterWorker for run {request.run_id!r} after {tries} tries", last)
