"""Who may talk to the dashboard: the token gate, a DNS-rebinding guard and a CSRF guard.

* Every request must carry the token printed at start-up, on loopback too (any local user
  can reach a loopback port): ``?token=`` in the first URL (answered with a cookie so the
  page's own requests carry it), the cookie, or ``Authorization: Bearer``. Missing: 401;
  wrong: 403 (:mod:`mosaic_core.webtoken`, shared with MOSAIC's other servers).
* Bound to loopback, the ``Host`` header must name loopback too, so a web page on another
  site cannot reach the server through a rebinding DNS name.
* A POST must carry the ``X-Mosaic-Dashboard`` header, which no cross-site form can send.

A pure ASGI middleware (no starlette import), so it is cheap to test and never buffers streams.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mosaic_core import webtoken

COOKIE = "mosaic_token"
POST_HEADER = b"x-mosaic-dashboard"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]")
    return host in LOOPBACK_NAMES or host.startswith("127.")


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class AccessGuard:
    """Wrap an ASGI app; refuse with a status and one-line reason before it sees a request.
    ``token`` None (tests of the other guards only) lets any token-less request through."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None, bound_host: str, cookie: str = COOKIE):
        self.app, self.token, self.bound_host, self.cookie = app, token, bound_host, cookie

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        status, reason, from_query = self.check(scope, headers)
        if status:
            await _refuse(scope, send, status, reason)
            return
        if from_query and self.token is not None:  # only a token can come in the query
            send = _with_cookie(send, self.token, self.cookie)
        await self.app(scope, receive, send)

    def check(self, scope: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bool]:
        """(status, reason, token came in the query); status 0 lets the request through."""
        from_query = False
        if is_loopback_host(_host_name(self.bound_host)):
            host = _host_name(headers.get("host", ""))
            if host and not is_loopback_host(host):
                return (
                    403,
                    (
                        f"Host {host!r} is not loopback: this dashboard answers only http://127.0.0.1 "
                        "or http://localhost (bind another address with --host to serve others)"
                    ),
                    False,
                )
        if self.token is not None:
            status, reason, from_query = webtoken.check(
                self.token, scope.get("query_string", b"").decode("latin-1"), headers, self.cookie, "mosaic serve"
            )
            if status:
                return status, reason, False
        if scope.get("method") == "POST" and "x-mosaic-dashboard" not in headers:
            return 403, "a POST needs the X-Mosaic-Dashboard header (the dashboard page sends it)", False
        return 0, "", from_query


def _with_cookie(send: Any, token: str, cookie: str) -> Any:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            value = webtoken.set_cookie(token, cookie).encode()
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value)]}
        await send(message)

    return sending


async def _refuse(scope: dict[str, Any], send: Any, status: int, reason: str) -> None:
    if scope.get("path", "").startswith("/api/"):
        body, kind = json.dumps({"error": reason}).encode(), b"application/json"
    else:
        body, kind = (reason + "\n").encode(), b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
