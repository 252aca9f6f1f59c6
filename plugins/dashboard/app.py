"""The dashboard's HTTP application (starlette): the page, its JSON API, SSE and MJPEG streams.

Routes (every ``/api`` error is JSON ``{"error": reason}`` with a 4xx/5xx status):

    GET  /                              the page (static, no build step)
    GET  /api/runs  /api/runs/stream    the run list (JSON / SSE)
    GET  /api/runs/{id}/stream          one run live (SSE, see streams.run_stream)
    GET  /api/runs/{id}/curves|logs|files
    GET  /api/runs/{id}/frames.mjpg     FastLane frames (multipart/x-mixed-replace)
    GET  /api/runs/{id}/frame.jpg       the newest frame
    POST /api/runs/{id}/cancel          through the daemon
    GET  /api/daemon  /api/daemon/form  POST /api/daemon/submit
    GET  /api/stats                     viewers, frames encoded, memory (for bench/dashboard.py)
    GET  /api/leagues  GET|POST /api/runs/{id}/human   the arena's pages (mosaic_dashboard.arena)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mosaic_core.runstore.follow import RunGone
from mosaic_dashboard import rundata, streams
from mosaic_dashboard.daemon import DaemonError, DaemonLink
from mosaic_dashboard.form import FormError, form_schema, parse_submission
from mosaic_dashboard.frames import BOUNDARY, FrameHub, encode_jpeg, frames_wanted, mjpeg_part, open_frames
from mosaic_dashboard.responses import JSONResponse, error, with_run_dir

STATIC = Path(__file__).parent / "static"
DAEMON_CACHE_S = 2.0
SSE_PING_S = 15
CHECKPOINT_LOGS_KEPT = 256  # runs whose announced checkpoints are followed (the oldest looked at goes)


class Dashboard:
    """Everything the routes share: the runs root, the run list cache, frames, the daemon."""

    def __init__(self, runs_root: Path, target: str | None, daemon_token: str | None = None):
        self.root = runs_root
        self.index = rundata.RunsIndex(runs_root)
        self.daemon = DaemonLink(target, daemon_token)
        self.frames = FrameHub()
        self.streams_open = 0
        self.stopping = asyncio.Event()
        self._list_lock = asyncio.Lock()
        self._list: tuple[float, list[dict[str, Any]]] = (0.0, [])
        self._daemon_runs: tuple[float, list[dict[str, Any]]] = (0.0, [])
        self._checkpoints: dict[str, rundata.SavedCheckpoints] = {}

    async def run_list(self) -> list[dict[str, Any]]:
        """Run directories merged with the daemon's records (queued runs have no directory yet)."""
        async with self._list_lock:
            stamp, cached = self._list
            if time.monotonic() - stamp < 0.5:
                return cached
            runs = await asyncio.to_thread(self.index.snapshot)
            records = await self._daemon_records()
            by_id = {r["run_id"]: dict(r) for r in runs}
            for record in records:
                entry = by_id.get(record["run_id"])
                if entry is None:
                    entry = by_id[record["run_id"]] = {
                        "run_id": record["run_id"],
                        "worker": record["worker"],
                        "status": "queued",
                        "started_at": record["created_at"],
                    }
                entry["daemon_status"] = record["status"]
            merged = sorted(by_id.values(), key=lambda r: (r.get("started_at") or 0.0, r["run_id"]), reverse=True)
            self._list = (time.monotonic(), merged)
            return merged

    async def _daemon_records(self) -> list[dict[str, Any]]:
        stamp, records = self._daemon_runs
        if self.daemon.target and time.monotonic() - stamp >= DAEMON_CACHE_S:
            records = await asyncio.to_thread(self.daemon.runs)
            self._daemon_runs = (time.monotonic(), records)
        return records

    def announced_checkpoints(self, run_dir: Path) -> list[dict[str, Any]]:
        """The run's ``checkpoint_saved`` events so far, read on from where the last look ended."""
        saved = self._checkpoints.pop(str(run_dir), None) or rundata.SavedCheckpoints(run_dir)
        self._checkpoints[str(run_dir)] = saved  # the newest looked at last
        while len(self._checkpoints) > CHECKPOINT_LOGS_KEPT:
            self._checkpoints.pop(next(iter(self._checkpoints)))
        return saved.look()

    def stop(self) -> None:
        """The server is shutting down: end every stream now so each response completes."""
        if not self.stopping.is_set():
            self.stopping.set()
            for feed in list(self.frames.feeds.values()):
                feed.finish()

    async def pause(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less when the server stops; True when it stops."""
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def run_dir(self, run_id: str) -> Path:
        return rundata.run_path(self.root, run_id)


def build_app(runs_root: Path, target: str | None = None, daemon_token: str | None = None) -> Starlette:
    from mosaic_dashboard.arena import arena_routes

    dash = Dashboard(runs_root, target, daemon_token)

    async def stats(request: Request) -> Response:
        return JSONResponse(
            {
                "frame_viewers": dash.frames.viewers,
                "frames_encoded": dash.frames.encoded,
                "streams_open": dash.streams_open,
                "rss_bytes": _rss_bytes(),
                "pid": os.getpid(),
            }
        )

    async def not_found(request: Request) -> Response:
        return error(404, f"no such endpoint {request.url.path}")

    routes = [
        *_run_routes(dash),
        *_frame_routes(dash),
        *_daemon_routes(dash),
        *arena_routes(dash),
        Route("/api/stats", stats),
        Route("/api/{rest:path}", not_found),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    app = Starlette(routes=routes, exception_handlers={RunGone: _run_gone, Exception: _internal_error})
    app.state.dashboard = dash
    return app


def _run_routes(dash: Dashboard) -> list[Route]:
    """The pages and the runs: the list, a run's stream, curves, logs and files, groups of runs."""

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def runs(request: Request) -> Response:
        return JSONResponse(await dash.run_list())

    async def runs_live(request: Request) -> Response:
        return _sse(dash, streams.runs_stream(dash.run_list, dash.pause))

    async def run_live(request: Request, run_dir: Path) -> Response:
        config = await asyncio.to_thread(rundata.read_json, run_dir / "config.json")
        return _sse(dash, streams.run_stream(run_dir, run_dir.name, frames_wanted(run_dir, config), dash.pause))

    async def curves(request: Request, run_dir: Path) -> Response:
        from mosaic_dashboard.curves import run_curves

        return JSONResponse({"run_id": run_dir.name, **await asyncio.to_thread(run_curves, run_dir)})

    async def logs(request: Request, run_dir: Path) -> Response:
        return JSONResponse({"run_id": run_dir.name, "logs": await asyncio.to_thread(rundata.log_tails, run_dir)})

    async def files(request: Request, run_dir: Path) -> Response:
        def found() -> dict[str, Any]:
            return rundata.artifacts(run_dir, run_dir.name, dash.announced_checkpoints(run_dir))

        return JSONResponse(await asyncio.to_thread(found))

    async def groups(request: Request) -> Response:
        from mosaic_dashboard.groups import MAX_RUNS, group_view

        ids = [i for i in request.query_params.get("runs", "").split(",") if i][:MAX_RUNS]
        try:
            dirs = [dash.run_dir(run_id) for run_id in dict.fromkeys(ids)]
        except rundata.UnknownRun as exc:
            return error(404, str(exc))
        if not dirs:
            return error(400, "name runs: /api/groups?runs=A,B")
        return JSONResponse(await asyncio.to_thread(group_view, dirs))

    return [
        Route("/", index),
        Route("/api/runs", runs),
        Route("/api/runs/stream", runs_live),
        Route("/api/runs/{run_id}/stream", with_run_dir(dash, run_live)),
        Route("/api/runs/{run_id}/curves", with_run_dir(dash, curves)),
        Route("/api/runs/{run_id}/logs", with_run_dir(dash, logs)),
        Route("/api/runs/{run_id}/files", with_run_dir(dash, files)),
        Route("/api/groups", groups),
    ]


def _frame_routes(dash: Dashboard) -> list[Route]:
    """A run's live frames: an MJPEG stream, or the latest frame as a JPEG."""

    async def frames(request: Request, run_dir: Path) -> Response:
        from mosaic_core import NoFrames

        run_id = run_dir.name
        stream = dash.frames.feed(run_dir).stream()
        try:
            first = await stream.__anext__()
        except NoFrames as exc:
            return error(404, f"no live frames for run {run_id}: {exc}")
        except StopAsyncIteration:
            return error(404, f"run {run_id} stopped publishing frames (its frames are gone)")

        async def parts():
            try:
                yield f"--{BOUNDARY}\r\n".encode() + mjpeg_part(first)
                async for jpeg in stream:
                    yield mjpeg_part(jpeg)
            finally:
                await stream.aclose()  # this viewer leaves now, not when collected

        return StreamingResponse(
            parts(), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}", headers={"Cache-Control": "no-store"}
        )

    async def frame(request: Request, run_dir: Path) -> Response:
        from mosaic_core import NoFrames

        try:
            jpeg = await asyncio.to_thread(_one_frame, run_dir)
        except NoFrames as exc:
            return error(404, f"no live frames for run {run_dir.name}: {exc}")
        if jpeg is None:
            return error(404, f"run {run_dir.name} has published no frame yet")
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    return [
        Route("/api/runs/{run_id}/frames.mjpg", with_run_dir(dash, frames)),
        Route("/api/runs/{run_id}/frame.jpg", with_run_dir(dash, frame)),
    ]


def _daemon_routes(dash: Dashboard) -> list[Route]:
    """The run daemon behind the page: its state, its submit form, a submission, a cancel."""

    async def cancel(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            rundata.checked_run_id(run_id)  # a queued run has no directory yet: only the id is checked
        except rundata.UnknownRun as exc:
            return error(404, str(exc))
        try:
            return JSONResponse(await asyncio.to_thread(dash.daemon.cancel, run_id))
        except DaemonError as exc:
            return error(exc.status, str(exc))

    async def daemon_state(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(dash.daemon.state))

    async def daemon_form(request: Request) -> Response:
        try:
            workers = await asyncio.to_thread(dash.daemon.workers)
        except DaemonError as exc:
            return error(exc.status, str(exc))
        active = sorted(w["name"] for w in workers if w["status"] == "active")
        name = request.query_params.get("worker") or (active[0] if active else "")
        worker = next((w for w in workers if w["name"] == name and w["status"] == "active"), None)
        if worker is None:
            return error(404, f"the daemon has no active worker {name!r} (active: {', '.join(active) or 'none'})")
        try:
            schema = await asyncio.to_thread(form_schema, worker, request.query_params.get("algo"))
        except FormError as exc:
            return error(400, str(exc))
        return JSONResponse({**schema, "workers": [w["name"] for w in workers if w["status"] == "active"]})

    async def submit(request: Request) -> Response:
        try:
            form = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, f"the form must be sent as JSON: {exc}")
        try:
            described = None
            if isinstance(form, dict) and isinstance(form.get("worker"), str) and form["worker"]:
                from mosaic_dashboard.form import worker_form

                described = await asyncio.to_thread(worker_form, form["worker"], str(form.get("algo") or "") or None)
            config = parse_submission(form, described)
            return JSONResponse(await asyncio.to_thread(dash.daemon.submit, config))
        except FormError as exc:
            return error(400, str(exc))
        except DaemonError as exc:
            return error(exc.status, str(exc))

    return [
        Route("/api/runs/{run_id}/cancel", cancel, methods=["POST"]),
        Route("/api/daemon", daemon_state),
        Route("/api/daemon/form", daemon_form),
        Route("/api/daemon/submit", submit, methods=["POST"]),
    ]


def _sse(dash: Dashboard, events: Any) -> EventSourceResponse:
    async def counted():
        dash.streams_open += 1
        try:
            async for item in events:
                yield item
        except Exception as exc:  # never a traceback: tell the page and end the stream
            print(f"mosaic serve: a stream stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
            yield streams.sse("failure", {"message": f"{type(exc).__name__}: {exc}"})
        finally:
            dash.streams_open -= 1

    # On shutdown sse-starlette calls ``shutdown_event.set()`` and waits the grace period for
    # the stream to end by itself; dash.stop() makes every stream end at once.
    return EventSourceResponse(
        counted(),
        ping=SSE_PING_S,
        headers={"Cache-Control": "no-store"},
        shutdown_event=_StopTrigger(dash),  # type: ignore[arg-type]  # sse-starlette only calls its set()
        shutdown_grace_period=1.0,
    )


class _StopTrigger:
    """What sse-starlette sets when the server shuts down: stops the dashboard's streams."""

    def __init__(self, dash: Dashboard):
        self.dash = dash

    def set(self) -> None:
        self.dash.stop()


async def _run_gone(request: Request, exc: Exception) -> Response:
    return error(404, str(exc))


async def _internal_error(request: Request, exc: Exception) -> Response:
    print(f"mosaic serve: {request.method} {request.url.path} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return error(500, f"internal error: {type(exc).__name__}: {exc}")


def _one_frame(run_dir: Path) -> bytes | None:
    reader = open_frames(run_dir)
    try:
        frame = reader.wait(timeout=2.0)
    finally:
        reader.close()
    return encode_jpeg(frame.pixels) if frame is not None else None


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def catch_all(app: Any) -> Any:
    """The outermost layer: an exception that escaped everything is one log line, never a traceback."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await app(scope, receive, sending)
        except Exception as exc:
            if scope["type"] != "http":
                raise
            if not started:
                body = json.dumps({"error": f"internal error: {type(exc).__name__}: {exc}"}).encode()
                await send(
                    {"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": body})

    return guarded
