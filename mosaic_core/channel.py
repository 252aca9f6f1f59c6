"""The side channel from a run's training processes to its host.

A Linux abstract-namespace Unix datagram socket: no file on disk, no path-length limit,
reachable from every process of the run (the training process and its env processes, forked
or spawned), message boundaries kept. Each datagram is one JSON object
``{"kind": str, "payload": {...}}``. Senders never block on the hot path: when the host is
slow, best-effort messages are dropped and counted; reliable ones wait up to a second.
Linux queues only ``net.unix.max_dgram_qlen`` datagrams per socket (10 by default), so
senders coalesce: send the latest state at a bounded rate, never one message per step.
Every datagram carries its sender's credentials (``SO_PASSCRED``); the host hears only its own
user's processes, so another user on the machine cannot inject into a run.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

MAX_DATAGRAM = 60_000
CREDENTIALS_SPACE = socket.CMSG_SPACE(struct.calcsize("iII"))
ENV_VAR = "MOSAIC_CHANNEL"


def new_address(run_id: str) -> str:
    """A unique abstract address for one run of this host process."""
    return f"mosaic/{run_id}/{os.getpid()}/{os.urandom(4).hex()}"


def _abstract(address: str) -> bytes:
    return b"\0" + address.encode()


class ChannelReceiver:
    """Host end: binds the address and hands every message to ``handler`` on one thread."""

    def __init__(self, address: str, handler: Callable[[str, dict[str, Any]], None]):
        self.address = address
        self._handler = handler
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        # The address is visible to every user (/proc/net/unix): the kernel tells us who sent
        # each datagram, and only our own user's processes are heard.
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._uid = os.geteuid()
        self.refused = 0  # datagrams from another user
        self._sock.bind(_abstract(address))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mosaic-channel", daemon=True)
        self.malformed = 0

    def start(self) -> ChannelReceiver:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._receive()
            except TimeoutError:
                continue
            except OSError:
                return
            if data:  # an empty datagram only wakes the loop (see close)
                self._dispatch(data)

    def _receive(self) -> bytes | None:
        """One datagram, or None when it came from another user (or carried no credentials)."""
        data, ancillary, _flags, _address = self._sock.recvmsg(MAX_DATAGRAM + 1024, CREDENTIALS_SPACE)
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(value) >= 12:
                _pid, uid, _gid = struct.unpack("iII", value[:12])
                if uid == self._uid:
                    return data
        self.refused += 1
        return None

    def _dispatch(self, data: bytes) -> None:
        try:
            message = json.loads(data)
            kind, payload = message["kind"], message.get("payload") or {}
            if not isinstance(kind, str) or not isinstance(payload, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            self.malformed += 1
            return
        self._handler(kind, payload)

    def close(self) -> None:
        """Stop the thread, deliver whatever is still queued, release the address (idempotent)."""
        if self._sock.fileno() < 0:
            return
        self._stop.set()
        if self._thread.is_alive():
            try:  # wake the blocked recv now instead of at its next timeout; never wait to: a full
                # queue (the thread may have stopped reading it) already wakes it, and is drained below
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as waker:
                    waker.sendto(b"", socket.MSG_DONTWAIT, _abstract(self.address))
            except OSError:
                pass
            self._thread.join(timeout=2)
        self._sock.setblocking(False)
        while True:
            try:
                data = self._receive()
            except (BlockingIOError, OSError):
                break
            if data:
                self._dispatch(data)
        self._sock.close()


class ChannelSender:
    """Training-process end. Safe to use after ``fork`` (the socket is re-made per pid)."""

    def __init__(self, address: str | None):
        self.address = address
        self.dropped = 0
        self._sock: socket.socket | None = None
        self._pid = -1

    def _socket(self) -> socket.socket:
        if self._sock is None or self._pid != os.getpid():
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._pid = os.getpid()
        return self._sock

    def send(self, kind: str, payload: dict[str, Any], reliable: bool = False) -> bool:
        """Send one message; returns False when it was dropped (or there is no host)."""
        if not self.address:
            return False
        data = json.dumps({"kind": kind, "payload": payload}, default=str).encode()
        if len(data) > MAX_DATAGRAM:
            raise ValueError(f"side-channel message {kind!r} is {len(data)} bytes (max {MAX_DATAGRAM})")
        sock = self._socket()
        try:
            if reliable:
                sock.settimeout(1.0)
                sock.sendto(data, _abstract(self.address))
            else:
                sock.sendto(data, socket.MSG_DONTWAIT, _abstract(self.address))
            return True
        except OSError:  # host gone, queue full, or timed out: never break training
            self.dropped += 1
            return False
