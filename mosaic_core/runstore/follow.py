"""Follow a run's ``events.jsonl`` by reading what was appended since the last look: the one
reader of a whole event log (the dashboard's live views, ``mosaic logs``), bounded in memory
whatever the file holds.

No inotify: the caller polls. Only complete lines are taken;
a line being written stays for the next poll. A malformed line, and one longer than
``MAX_LINE_BYTES`` (dropped as it is read, never held whole), is skipped and counted. The
file being replaced (smaller than what was read) restarts from the top; the run directory
disappearing is reported as :class:`RunGone`.

A resumed run reads as one history (:func:`mosaic_core.events.one_history`): in what one poll
returns (all of the log on the first), an earlier attempt's metrics past a later resume's
``from_step`` are left out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic_core.events import one_history
from mosaic_core.files import UntrustedPath, open_private
from mosaic_core.runstore.summary import MAX_LINE_BYTES

__all__ = ["EventFollower", "READ_LIMIT", "RunGone"]

READ_LIMIT = 4 * 1024 * 1024  # at most this much per poll, so a huge log cannot stall the server


class RunGone(Exception):
    """The run directory was deleted while someone watched it."""


class EventFollower:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.path = run_dir / "events.jsonl"
        self.offset = 0
        self.skipped = 0
        self._partial = b""
        self._dropping = False  # inside a line over MAX_LINE_BYTES: read on to its end, keep nothing
        self.behind = False  # more was there than one poll reads
        self.refused: str | None = None  # why the log was not read (not ours, a link, a FIFO)

    def poll(self) -> list[dict[str, Any]]:
        """Events appended since the last call (all of them on the first call, up to
        ``READ_LIMIT`` bytes a call: call again while :attr:`behind`)."""
        if not self.run_dir.is_dir():
            raise RunGone(f"run directory {self.run_dir} was deleted")
        try:
            with open_private(self.path) as handle:  # never a link, FIFO or another user's file
                size = os.fstat(handle.fileno()).st_size
                if size < self.offset:  # replaced: from the top
                    self.offset, self._partial, self._dropping = 0, b"", False
                handle.seek(self.offset)
                chunk = handle.read(READ_LIMIT)
        except UntrustedPath as exc:
            self.refused = str(exc)
            return []
        except OSError:  # not there yet (the run is still starting), or gone
            return []
        if not chunk:
            self.behind = False
            return []
        self.offset += len(chunk)
        self.behind = self.offset < size
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if self._dropping:
            if lines:
                lines.pop(0)  # the end of the over-long line
                self._dropping = False
            else:
                self._partial = b""
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial, self._dropping = b"", True
            self.skipped += 1
        return one_history([event for event in map(self._parse, lines) if event is not None])

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        if len(line) > MAX_LINE_BYTES:
            self.skipped += 1
            return None
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.skipped += 1
            return None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            self.skipped += 1
            return None
        return event
