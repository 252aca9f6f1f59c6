"""The live streams the page subscribes to (Server-Sent Events), as async generators of
``{"event": name, "data": json}``. Files are polled only while a client is connected, and
all file reading happens in worker threads so a slow disk never stalls the server.

* :func:`runs_stream`: the run list whenever it changes (checked every ``LIST_POLL_S``).
* :func:`run_stream`: one run: a ``snapshot`` (config, manifest, events so far, curves), then
  each new ``event``, curve ``points``, the ``manifest`` when it appears, ``fastlane`` status,
  and ``gone`` (then the end) when the run directory is deleted while viewed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mosaic_core import manifest_of
from mosaic_core.jsontext import dumps
from mosaic_core.runstore.follow import EventFollower, RunGone
from mosaic_dashboard.curves import Curves
from mosaic_dashboard.rundata import read_json

LIST_POLL_S = 1.0
EVENTS_POLL_S = 0.5
FASTLANE_POLL_S = 1.0
MANIFEST_POLL_S = 2.0
SHOWN_EVENTS = 500  # the snapshot carries the newest this many non-metrics events
TERMINAL = ("run_completed", "run_failed", "run_cancelled")


def sse(name: str, data: Any) -> dict[str, str]:
    return {"event": name, "data": dumps(data, default=str)}


async def runs_stream(listing: Any, pause: Any) -> AsyncIterator[dict[str, str]]:
    """``listing()`` returns the current run list; ``pause(s)`` sleeps and says whether to stop."""
    last = None
    while True:
        runs = await listing()
        text = dumps(runs, sort_keys=True, default=str)
        if text != last:
            last = text
            yield {"event": "runs", "data": text}
        if await pause(LIST_POLL_S):
            return


class RunWatch:
    """The state of one run stream: follower, curves, manifest and frame reader."""

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir, self.run_id = run_dir, run_id
        self.follower = EventFollower(run_dir)
        self.curves = Curves()
        self.manifest_mark: float | None = None
        self.reader: Any = None
        self.fastlane_note: str | None = None

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest when it is new or changed since the last look, else None."""
        path = manifest_of(self.run_dir)
        try:
            mark = path.stat().st_mtime
        except OSError:
            return None
        if mark == self.manifest_mark:
            return None
        self.manifest_mark = mark
        return read_json(path)

    def fastlane(self) -> dict[str, Any] | None:
        """Live-frame status (FastLane's), opening the reader on first need; None while there are none."""
        from mosaic_core import NoFrames
        from mosaic_dashboard.frames import open_frames

        try:
            if self.reader is None:
                self.reader = open_frames(self.run_dir)
            status = self.reader.status()
        except NoFrames as exc:
            self.close()
            note = str(exc)
            if note == self.fastlane_note:
                return None
            self.fastlane_note = note
            return {"available": False, "reason": note}
        self.fastlane_note = None
        if status["ended"]:
            self.close()
        return {"available": True, **status}

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


async def run_stream(run_dir: Path, run_id: str, fastlane_wanted: bool, pause: Any) -> AsyncIterator[dict[str, str]]:
    watch = RunWatch(run_dir, run_id)
    try:
        try:
            events = await asyncio.to_thread(watch.follower.poll)
        except RunGone as exc:
            yield sse("gone", {"message": str(exc)})
            return
        shown = []
        for event in events:
            if event["event"] == "metrics":
                watch.curves.add(event.get("payload"))
            else:
                shown.append(event)
        config = await asyncio.to_thread(read_json, run_dir / "config.json")
        manifest = await asyncio.to_thread(watch.read_manifest)
        yield sse(
            "snapshot",
            {
                "run_id": run_id,
                "config": config,
                "manifest": manifest,
                "events": shown[-SHOWN_EVENTS:],
                "events_total": len(shown),
                "curves": watch.curves.to_dict(),
                "skipped_lines": watch.follower.skipped,
            },
        )
        ended = any(e["event"] in TERMINAL for e in shown)
        next_fastlane = next_manifest = 0.0
        while True:
            try:
                events = await asyncio.to_thread(watch.follower.poll)
            except RunGone as exc:
                yield sse("gone", {"message": f"{exc}; the server is still serving the other runs"})
                return
            for event in events:
                if event["event"] == "metrics":
                    points = watch.curves.add(event.get("payload"))
                    if points:
                        yield sse("points", points)
                else:
                    yield sse("event", event)
                ended = ended or event["event"] in TERMINAL
            now = time.monotonic()
            if fastlane_wanted and not ended and now >= next_fastlane:
                next_fastlane = now + FASTLANE_POLL_S
                status = await asyncio.to_thread(watch.fastlane)
                if status is not None:
                    yield sse("fastlane", status)
            if now >= next_manifest or events:
                next_manifest = now + MANIFEST_POLL_S
                manifest = await asyncio.to_thread(watch.read_manifest)
                if manifest is not None:
                    yield sse("manifest", manifest)
            # A finished run changes no more; look only for its deletion, less often.
            if await pause(EVENTS_POLL_S if not ended else MANIFEST_POLL_S):
                return
    finally:
        watch.close()
