"""What both ends of the trainer protocol agree on: version, token metadata, limits, addresses.

The generated modules ``trainer_pb2`` / ``trainer_pb2_grpc`` come from ``trainer.proto``;
regenerate them from the repository root with::

    python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. \\
        mosaic_core/trainer/trainer.proto

Session tokens travel as gRPC metadata under :data:`TOKEN_METADATA` (see trainer.proto); the
client token and registration secrets are :mod:`mosaic_core.trainer.auth`'s.
"""

from __future__ import annotations

import re

from mosaic_core.errors import UsageError

PROTO_VERSION = "MOSAIC/1.0"
SUPPORTED_MAJOR = 1
TOKEN_METADATA = "x-mosaic-session-token"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
# The daemon's own: no BDP probing, so each stream's HTTP/2 window stays at its initial 64 KiB. What a
# caller sends before the gate has read its metadata and refused it is buffered up to that window;
# with probing on, loopback's windows grew to megabytes and 16 unauthenticated 60 MiB SubmitRuns
# raised the daemon's peak memory by up to 163 MiB on a busy machine (0.6 MiB without it). The
# protocol's messages are small; a 60 MiB one still takes 0.3 s on loopback either way.
SERVER_OPTIONS = [*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0), ("grpc.http2.bdp_probe", 0)]
DEFAULT_LISTEN = "127.0.0.1:50055"
STATUS_NAMES = ("UNSPECIFIED", "INIT", "HSHK", "RDY", "EXEC", "PAUSE", "FAULT", "TERM")
FINAL_STATUSES = frozenset({6, 7})  # FAULT, TERM
_VERSION = re.compile(r"^MOSAIC/(\d+)\.(\d+)$")
_TARGET = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+):(?P<port>\d{1,5})$")


class VersionError(ValueError):
    """A proto_version this side cannot speak."""


def negotiate(requested: str) -> str:
    """The version to answer a worker that asked for ``requested``; VersionError otherwise."""
    match = _VERSION.match(requested or "")
    if not match:
        raise VersionError(
            f"proto_version {requested!r} is not of the form MOSAIC/<major>.<minor>; this daemon speaks {PROTO_VERSION}"
        )
    if int(match.group(1)) != SUPPORTED_MAJOR:
        raise VersionError(
            f"proto_version {requested!r} is not supported: this daemon speaks "
            f"MOSAIC/{SUPPORTED_MAJOR}.x (answers {PROTO_VERSION})"
        )
    return PROTO_VERSION


def check_target(target: str, what: str = "--target") -> tuple[str, int]:
    """``HOST:PORT`` split and checked; a UsageError names ``what`` otherwise."""
    match = _TARGET.match(target or "")
    port = int(match.group("port")) if match else -1
    if not match or not 0 <= port <= 65535:
        raise UsageError(f"{what} must look like HOST:PORT (e.g. {DEFAULT_LISTEN}), got {target!r}")
    return match.group("host"), port


def status_name(value: int) -> str:
    return STATUS_NAMES[value] if 0 <= value < len(STATUS_NAMES) else str(value)


def status_value(name: str) -> int:
    """A RunStatus from ``EXEC``, ``exec`` or ``RUN_STATUS_EXEC``; UsageError otherwise."""
    key = name.strip().upper().removeprefix("RUN_STATUS_")
    if key not in STATUS_NAMES:
        raise UsageError(f"unknown run status {name!r}; one of {', '.join(STATUS_NAMES[1:])}")
    return STATUS_NAMES.index(key)


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")
