"""What a page of ours may do once loaded: every response carries a Content-Security-Policy that
allows only the dashboard's own files (no inline script or style attribute, no plugins, no
``<base>``, no framing by another site) and ``X-Content-Type-Options: nosniff``.

The page shows whatever a run's files hold as text (``static/dom.js``); this policy is the second
wall: should markup ever slip through, a script in it does not run. A pure ASGI middleware, the
outermost layer, so refusals (401/403) and errors carry the headers too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_NAMES = {name for name, _value in HEADERS}


class SecurityHeaders:
    """Wrap an ASGI app: each HTTP response's headers end with :data:`HEADERS` (replacing any
    the app set itself)."""

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                message = {**message, "headers": [*kept, *HEADERS]}
            await send(message)

        await self.app(scope, receive, sending)
