"""Run the dashboard with uvicorn and say where it is: one JSON line on stdout (the URL with
its token: every request needs it, on loopback too), one human line on stderr. The token is
also in a 0600 file in the user's runtime dir while the server runs (:mod:`mosaic_core.webtoken`).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import uvicorn

from mosaic_core import UsageError, webtoken
from mosaic_core.toolkit import check_runs_root, default_runs_root
from mosaic_dashboard.access import AccessGuard
from mosaic_dashboard.app import Dashboard, build_app, catch_all
from mosaic_dashboard.headers import SecurityHeaders


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a UsageError naming the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: cannot resolve it: {exc.strerror}") from None
    family, _kind, _proto, _name, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--host {host} --port {port}: cannot listen: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, ending the dashboard's endless streams first when it shuts down. It says
    it is ready (``ready()``) once it listens with its signal handlers in place: a Ctrl-C that
    follows the ready line always stops it (one sent before uvicorn's handlers could land in
    asyncio's own, which cancels a task uvicorn has not started, and the server ran on)."""

    def __init__(self, config: uvicorn.Config, dashboard: Dashboard, ready: Callable[[], None]):
        super().__init__(config)
        self.dashboard = dashboard
        self.ready = ready

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            self.ready()

    async def shutdown(self, sockets=None) -> None:
        self.dashboard.stop()
        await super().shutdown(sockets)


def serve(host: str, port: int, runs_dir: str | None, target: str | None, daemon_token: str | None = None) -> int:
    root = Path(runs_dir or default_runs_root()).absolute()
    try:
        check_runs_root(root)
    except OSError as exc:
        raise UsageError(str(exc)) from None
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = webtoken.issue("serve", port)  # on loopback too: any local user can reach the port
    shown_host = f"[{host}]" if ":" in host else host
    dashboard_app = build_app(root, target, daemon_token)
    app = SecurityHeaders(
        catch_all(
            AccessGuard(
                dashboard_app, token.value, bound_host=f"{shown_host}:{port}", cookie=webtoken.cookie_name(port)
            )
        )
    )
    url = token.url(f"http://{shown_host}:{port}/")
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="off", server_header=False
    )

    def ready() -> None:
        print(
            json.dumps(
                {
                    "event": "serve_ready",
                    "url": url,
                    "host": host,
                    "port": port,
                    "pid": os.getpid(),
                    "runs_dir": str(root),
                    "target": target,
                    "token_required": True,
                    "token_file": str(token.file),
                }
            ),
            flush=True,
        )
        print(
            f"mosaic serve: dashboard at the URL above (open it with its token; the token is also in "
            f"{token.file}, 0600, until the server stops); runs from {root}"
            f"{f', daemon {target}' if target else ''}; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )

    server = _Server(config, dashboard_app.state.dashboard, ready)
    try:
        server.run(sockets=[sock])
    finally:
        token.remove()
    return 0
