"""The arena's pages' data: leagues' standings and a match's human seats, read and sent through the
hooks the arena plugin declares (``mosaic_league_standings``, ``mosaic_human_turns``,
``mosaic_human_answer``), so the dashboard imports nothing of the arena and parses none of its files.

Routes::

    GET  /api/leagues              {"leagues": [standings, ...]} (each as `mosaic league show --json`)
    GET  /api/runs/{id}/human      the match's human seats: open turns, outcomes (a page looks)
    POST /api/runs/{id}/human      {"seat", "turn", "action"} or {"seat", "turn", "leave": true}
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

MAX_ANSWER_BYTES = 4096


def _results(hook: str, **kwargs: Any) -> list[Any]:
    """Each plugin's result of ``hook`` (none when no plugin declares it); a failure is one log line."""
    from mosaic_core.toolkit import plugin_host

    found = []
    for plugin, result, failure in plugin_host().provided(hook, **kwargs):
        if failure is not None:
            print(f"mosaic serve: {hook} of {plugin.name} failed: {failure}", file=sys.stderr)
        elif result is not None:
            found.append(result)
    return found


def arena_routes(dash: Any) -> list[Route]:
    from mosaic_dashboard.responses import JSONResponse, error, with_run_dir

    async def leagues(request: Request) -> Response:
        found = await asyncio.to_thread(_results, "mosaic_league_standings", runs_root=dash.root)
        return JSONResponse(
            {"leagues": [league for listing in found if isinstance(listing, list) for league in listing]}
        )

    async def human(request: Request, run_dir: Path) -> Response:
        found = await asyncio.to_thread(_results, "mosaic_human_turns", run_dir=run_dir)
        if not found:
            return error(404, f"run {run_dir.name} has no human seat (or the arena plugin is not installed)")
        return JSONResponse(found[0], headers={"Cache-Control": "no-store"})

    async def human_answer(request: Request, run_dir: Path) -> Response:
        body = await request.body()
        try:
            given = json.loads(body) if len(body) <= MAX_ANSWER_BYTES else None
        except (ValueError, UnicodeDecodeError):
            given = None
        if not isinstance(given, dict):
            return error(400, f"the answer must be a JSON object of at most {MAX_ANSWER_BYTES} bytes")
        refusals = await asyncio.to_thread(_answer, run_dir, given)
        if refusals is None:
            return error(404, f"run {run_dir.name} has no human seat (or the arena plugin is not installed)")
        if refusals:
            return error(409, refusals[0])
        return JSONResponse({"taken": True})

    return [
        Route("/api/leagues", leagues),
        Route("/api/runs/{run_id}/human", with_run_dir(dash, human)),
        Route("/api/runs/{run_id}/human", with_run_dir(dash, human_answer), methods=["POST"]),
    ]


def _answer(run_dir: Path, given: dict[str, Any]) -> list[str] | None:
    """The refusals of the plugin that took the answer to the match ([] when taken); None when no
    plugin knows the run."""
    results = _results("mosaic_human_answer", run_dir=run_dir, answer=given)
    if not results:
        return None
    return [] if results[0] is True else [str(results[0])[:500]]
