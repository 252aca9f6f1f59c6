"""Who may call the trainer daemon, and how many long calls it serves at once.

Three credentials, each for one kind of caller (see SECURITY.md):

- the **client token**: ``authorization: Bearer <token>`` metadata on the control and
  read calls (submit, cancel, list, watch, telemetry streams, workers). The daemon makes a
  new one at every start and writes it to ``STATE_DIR/client.token`` (0600, in the 0700
  state dir), as Jupyter does; whoever can read that file may use the daemon.
- the **registration secret**: one per spawned run, handed to it in its environment
  (:data:`REGISTRATION_ENV`) and sent back as :data:`REGISTRATION_METADATA` by its first
  RegisterWorker, so no one else can register as the run's training program (the wire's "worker").
  A program the owner started by hand registers a *new* run with the client token instead
  (never an existing run: those need their secret).
- the **session token** RegisterWorker returns (``x-mosaic-session-token``): Heartbeat,
  Publish* and ReportRunEvent for that run.

``GetHealth`` needs none: it says whether a daemon answers (pid, address, counts) and lets a
client tell "no daemon" from "no credential" (the owner's client sends the token anyway, so others'
calls never take its place). :class:`RpcGate` (a server interceptor) checks
the credentials in a call's metadata before gRPC reads its body (interceptors run on the
server's polling thread, before a pool thread waits for the request message): a call without
one is answered by a handler that never reads the body (so a half-open call or a 60 MiB
message costs no thread and no memory), within a small budget of its own
(:data:`ANONYMOUS_SLOTS`). It also caps the streaming calls, so idle streams can never take
the threads unary calls need.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

TOKEN_FILE = "client.token"
TOKEN_ENV = "MOSAIC_TOKEN"
AUTH_METADATA = "authorization"
REGISTRATION_METADATA = "x-mosaic-registration-secret"
REGISTRATION_ENV = "MOSAIC_REGISTRATION_SECRET"
SERVICE = "/gymgui.trainer.TrainerService/"
OPEN_METHODS = frozenset({"GetHealth"})
# What a run's training program calls (the wire's "worker": RegisterWorker and after).
PROGRAM_METHODS = frozenset(
    {"RegisterWorker", "Heartbeat", "PublishRunSteps", "PublishRunEpisodes", "ControlStream", "ReportRunEvent"}
)
STREAMING_METHODS = frozenset(
    {"WatchRuns", "StreamRunSteps", "StreamRunEpisodes", "PublishRunSteps", "PublishRunEpisodes", "ControlStream"}
)
UNARY_RESERVE = 16  # RPC threads kept free of streams for health, list, submit, register, heartbeat
ANONYMOUS_SLOTS = 4  # calls without a credential (GetHealth) served at once; more: RESOURCE_EXHAUSTED
SESSION_METADATA = "x-mosaic-session-token"  # == protocol.TOKEN_METADATA (no import: protocol is light)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def secrets_match(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def write_token(state_dir: Path) -> str:
    """A fresh client token in ``state_dir/client.token`` (0600, replaced atomically)."""
    from mosaic_core.files import write_atomic

    token = new_secret()
    write_atomic(Path(state_dir) / TOKEN_FILE, (token + "\n").encode(), mode=0o600)
    return token


def read_token(path: Path | str) -> str:
    """The token in a token file; :class:`UsageError` naming the file otherwise."""
    from mosaic_core.errors import UsageError

    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(
            f"cannot read the daemon's client token from {path}: {exc.strerror or exc}; "
            f"give --token-file, --state-dir or ${TOKEN_ENV}"
        ) from None
    if not text:
        raise UsageError(f"the token file {path} is empty")
    return text


def find_token(token_file: str | None = None, state_dir: str | None = None) -> str | None:
    """The client token a CLI call sends: ``--token-file``, else ``$MOSAIC_TOKEN``, else
    ``--state-dir``'s ``client.token``, else ``var/trainer/client.token`` when readable."""
    if token_file:
        return read_token(token_file)
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV].strip()
    if state_dir:
        return read_token(Path(state_dir) / TOKEN_FILE)
    default = Path("var/trainer") / TOKEN_FILE
    return read_token(default) if os.access(default, os.R_OK) else None


def bearer(token: str | None) -> list[tuple[str, str]]:
    return [(AUTH_METADATA, f"Bearer {token}")] if token else []


def presented_token(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == AUTH_METADATA and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer ") :].strip()
    return None


class RpcGate(grpc.ServerInterceptor):
    """A ``grpc.ServerInterceptor``: client token on every method but :data:`OPEN_METHODS`
    and the worker's, which need a live registration secret or session token
    (``program_credential(session_token, registration_secret)``; the servicer then checks it
    belongs to the run named in the body). Decided on metadata alone, before the body is read:
    a call with no valid credential is refused (or, for GetHealth, answered) by a handler that
    never reads its body, at most :data:`ANONYMOUS_SLOTS` at once. At most ``max_streams``
    streaming calls at once (beyond: RESOURCE_EXHAUSTED at once, no thread held)."""

    def __init__(
        self,
        token: str | None,
        max_streams: int,
        program_credential: Callable[[str | None, str | None], bool] | None = None,
        anonymous_slots: int = ANONYMOUS_SLOTS,
    ):
        self.token = token
        self.max_streams = max_streams
        self._streams = threading.BoundedSemaphore(max_streams)
        self.program_credential = program_credential or (lambda _session, _secret: False)
        self._anonymous = threading.BoundedSemaphore(anonymous_slots)
        self.anonymous_slots = anonymous_slots

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        method = details.method.removeprefix(SERVICE)
        if handler is None:
            return None
        if self.token is not None and not self._credentialed(method, details.invocation_metadata):
            return self._anonymous_call(method, handler)
        if method in STREAMING_METHODS:
            return self._replace(handler, self._bounded(_behaviour(handler), handler.response_streaming))
        return handler

    def _credentialed(self, method: str, metadata: Any) -> bool:
        if secrets_match(self.token, presented_token(metadata)):
            return True
        if method in PROGRAM_METHODS:
            found = dict((key, value) for key, value in metadata or () if isinstance(value, str))
            session, secret = found.get(SESSION_METADATA), found.get(REGISTRATION_METADATA)
            return bool(session or secret) and self.program_credential(session, secret)
        return False

    def _anonymous_call(self, method: str, handler: Any) -> Any:
        """A handler for a call without a credential that never reads its request (a
        request-streaming handler whose iterator is left alone: gRPC calls it at once)."""
        if not self._anonymous.acquire(blocking=False):
            limit = self.anonymous_slots
            return _unread(
                handler,
                lambda context: context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"at most {limit} calls without a credential at once; retry later",
                ),
            )
        slots = self._anonymous
        if method in OPEN_METHODS:
            empty = handler.request_deserializer(b"") if handler.request_deserializer else None
            behaviour = _behaviour(handler)

            def answer(context: Any) -> Any:
                try:
                    return behaviour(empty, context)  # GetHealth's request carries nothing
                finally:
                    slots.release()

            return _unread(handler, answer)
        refusal = self._refusal(method)

        def refuse(context: Any) -> Any:
            try:
                return refusal(None, context)
            finally:
                slots.release()

        return _unread(handler, refuse)

    def _refusal(self, method: str) -> Callable[..., Any]:
        code = grpc.StatusCode.UNAUTHENTICATED
        if method == "RegisterWorker":
            reason = (
                f"a first RegisterWorker needs the registration secret the daemon gave the run's process "
                f"(${REGISTRATION_ENV}), as metadata {REGISTRATION_METADATA!r}; a replacement, its training program's "
                f"session token ({SESSION_METADATA!r}); a program started by hand, the daemon's client token "
                f"(${TOKEN_ENV}, or STATE_DIR/{TOKEN_FILE}); the same answer for every run id"
            )
        elif method in PROGRAM_METHODS:
            reason = (
                f"a session token is required: send the one RegisterWorker returned as metadata {SESSION_METADATA!r}"
            )
        else:
            reason = (
                f"{method} needs the daemon's client token as metadata "
                f"'{AUTH_METADATA}: Bearer <token>' (the owner finds it in STATE_DIR/{TOKEN_FILE})"
            )

        def refuse(request: Any, context: Any) -> Any:
            context.abort(code, reason)

        return refuse

    def _bounded(self, behaviour: Callable[..., Any], streaming_response: bool) -> Callable[..., Any]:
        code, limit, slots = grpc.StatusCode.RESOURCE_EXHAUSTED, self.max_streams, self._streams

        def too_many(context: Any) -> None:
            context.abort(code, f"this daemon serves at most {limit} open streams at once; close one or retry later")

        if streaming_response:

            def stream(request: Any, context: Any) -> Any:
                if not slots.acquire(blocking=False):
                    too_many(context)
                try:
                    yield from behaviour(request, context)
                finally:
                    slots.release()

            return stream

        def unary(request: Any, context: Any) -> Any:
            if not slots.acquire(blocking=False):
                too_many(context)
            try:
                return behaviour(request, context)
            finally:
                slots.release()

        return unary

    @staticmethod
    def _replace(handler: Any, behaviour: Callable[..., Any]) -> Any:
        """``handler`` with another behaviour (same kind, same (de)serializers)."""
        make = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }
        kind = (handler.request_streaming, handler.response_streaming)
        return make[kind](
            behaviour,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _behaviour(handler: Any) -> Callable[..., Any]:
    behaviour: Callable[..., Any] = (
        handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    )
    return behaviour


def _unread(handler: Any, behaviour: Callable[[Any], Any]) -> Any:
    """A handler of ``handler``'s response kind whose request side is a stream never read:
    ``behaviour(context)`` runs at once, whatever the client sends (or never sends)."""
    if handler.response_streaming:

        def stream(_requests: Any, context: Any) -> Any:
            behaviour(context)  # a refusal: it aborts
            yield from ()

        return grpc.stream_stream_rpc_method_handler(
            stream, request_deserializer=None, response_serializer=handler.response_serializer
        )
    return grpc.stream_unary_rpc_method_handler(
        lambda _requests, context: behaviour(context),
        request_deserializer=None,
        response_serializer=handler.response_serializer,
    )
