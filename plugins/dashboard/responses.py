"""What every route answers with: strict JSON, a JSON error, and the run a route is about."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse as StarletteJSON
from starlette.responses import Response

from mosaic_core.jsontext import dumps
from mosaic_dashboard import rundata


class JSONResponse(StarletteJSON):
    """Starlette's, as strict JSON (:mod:`mosaic_core.jsontext`): a NaN a run's file holds is
    ``null``, never a 500 that empties the whole run list."""

    def render(self, content: Any) -> bytes:
        return dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})


def with_run_dir(dash: Any, handler: Any) -> Any:
    """A route handler that receives the run's directory; an unknown run is answered 404."""

    async def route(request: Request) -> Response:
        try:
            run_dir = dash.run_dir(request.path_params["run_id"])
        except rundata.UnknownRun as exc:
            return error(404, str(exc))
        return await handler(request, run_dir)

    return route
