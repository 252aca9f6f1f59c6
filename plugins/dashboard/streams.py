"""The live streams the page subscribes to (Server-Sent Events), as async generators of
``{"event": name, "data": json}``. Files are polled only while a client is connected, and
all file reading happens in worker threads so a slow disk never stalls the server.

* :func:`runs_stream`: the run list whenever it changes (checked every ``LIST_POLL_S``).
* :func:`run_stream`: one run: a ``snapshot`` (config, manifest, events so far, curves), then
  each new ``event``, curve ``points`` (of the ``metrics`` events), the new ``recorded`` points
  (``{name: [[step, value], …]}`` to append: every episode, every iteration, read from the run's
  records every ``RECORDED_POLL_S`` while it runs), all ``curves`` again when they changed
  otherwise (the first records, a new series, a resume's purge), the ``manifest`` when it
  appears, ``frames`` (the live frames' status), and ``gone`` (then the end) when the run directory is deleted
  while viewed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mosaic_core.jsontext import dumps
from mosaic_core.runstore.follow import EventFollower, RunGone
from mosaic_core.toolkit import manifest_of
from mosaic_dashboard.curves import Curves, merged, recorded_series, replaced
from mosaic_dashboard.rundata import read_json

LIST_POLL_S = 1.0
EVENTS_POLL_S = 0.5
RECORDED_POLL_S = 1.0
FASTLANE_POLL_S = 1.0
MANIFEST_POLL_S = 2.0
SHOWN_EVENTS = 500  # the snapshot carries the newest this many non-metrics events
TERMINAL = ("run_completed", "run_failed", "run_cancelled")


def _marks(recorded: dict[str, list[list[float]]]) -> dict[str, tuple[int, list[float]]]:
    return {name: (len(points), points[-1]) for name, points in recorded.items()}


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
        self.recorded: dict[str, tuple[int, list[float]]] = {}  # sent: name -> (points, the last one)
        self.thinned: dict[str, int] = {}
        self.manifest_mark: float | None = None
        self.reader: Any = None
        self.fastlane_note: str | None = None

    def all_curves(self) -> dict[str, Any]:
        """Every series now (the records read afresh), marked as sent."""
        return self._sent(*recorded_series(self.run_dir, self.curves.series))

    def _sent(self, recorded: dict[str, list[list[float]]], thinned: dict[str, int]) -> dict[str, Any]:
        self.recorded, self.thinned = _marks(recorded), thinned
        return {"curves": merged(self.curves.to_dict(), recorded), "recorded": sorted(recorded), "thinned": thinned}

    def recorded_news(self) -> tuple[str, dict[str, Any]] | None:
        """What the page lacks of the run's records: ``("recorded", {name: new points})`` when every
        series only grew, ``("curves", …)`` (all of them) when they changed otherwise (the first
        records, a new series, a resume's purge, a thinned series), None when nothing changed."""
        recorded, thinned = recorded_series(self.run_dir, self.curves.series)
        if _marks(recorded) == self.recorded:
            return None
        news = {}
        for name, points in recorded.items():
            count, last = self.recorded.get(name, (0, None))
            changed = len(points) < count or points[count - 1] != last
            if thinned or self.thinned or set(recorded) != set(self.recorded) or changed:
                return "curves", self._sent(recorded, thinned)
            news[name] = points[count:]
        self.recorded = _marks(recorded)
        news = {name: points for name, points in news.items() if points}
        return ("recorded", news) if news else None

    def shown(self, points: dict[str, list[float]]) -> dict[str, list[float]]:
        """The new points of ``metrics`` events the page draws (not those the records replace)."""
        return {name: p for name, p in points.items() if not replaced(name, self.recorded)}

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


async def _snapshot(
    watch: RunWatch, run_dir: Path, run_id: str, shown: list[dict[str, Any]], frames_wanted: bool
) -> dict[str, Any]:
    """A viewer's first message: the run's config, manifest, events so far and curves."""
    config = await asyncio.to_thread(read_json, run_dir / "config.json")
    manifest = await asyncio.to_thread(watch.read_manifest)
    curves = await asyncio.to_thread(watch.all_curves)
    return {
        "run_id": run_id,
        "config": config,
        "manifest": manifest,
        "events": shown[-SHOWN_EVENTS:],
        "events_total": len(shown),
        **curves,
        "skipped_lines": watch.follower.skipped,
        "live_frames": frames_wanted,
    }


async def run_stream(run_dir: Path, run_id: str, frames_wanted: bool, pause: Any) -> AsyncIterator[dict[str, str]]:
    watch = RunWatch(run_dir, run_id)
    try:
        try:
            events = await asyncio.to_thread(watch.follower.poll)
        except RunGone as exc:
            yield sse("gone", {"message": str(exc)})
            return
        shown = [event for event in events if event["event"] != "metrics"]
        for event in events:
            if event["event"] == "metrics":
                watch.curves.add(event.get("payload"))
        yield sse("snapshot", await _snapshot(watch, run_dir, run_id, shown, frames_wanted))
        ended = any(e["event"] in TERMINAL for e in shown)
        next_frames = next_manifest = 0.0
        next_records = time.monotonic() + RECORDED_POLL_S
        while True:
            try:
                events = await asyncio.to_thread(watch.follower.poll)
            except RunGone as exc:
                yield sse("gone", {"message": f"{exc}; the server is still serving the other runs"})
                return
            was_running = not ended
            for event in events:
                if event["event"] == "metrics":
                    points = watch.shown(watch.curves.add(event.get("payload")))
                    if points:
                        yield sse("points", points)
                else:
                    yield sse("event", event)
                ended = ended or event["event"] in TERMINAL
            now = time.monotonic()
            if was_running and (now >= next_records or ended):  # once more at the end: the last records
                next_records = now + RECORDED_POLL_S
                news = await asyncio.to_thread(watch.recorded_news)
                if news is not None:
                    yield sse(*news)
            if frames_wanted and not ended and now >= next_frames:
                next_frames = now + FASTLANE_POLL_S
                status = await asyncio.to_thread(watch.fastlane)
                if status is not None:
                    yield sse("frames", status)
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
