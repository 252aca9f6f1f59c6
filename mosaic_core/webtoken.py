"""The token every web server MOSAIC starts asks for, on loopback too (``mosaic serve``,
``mosaic fastlane watch``, ``mosaic tensorboard``, ``mosaic sweep dashboard``).

Any local user can connect to a loopback port (and find it in ``/proc/net/tcp``), so a port is
no secret. As Jupyter does, each server makes a random token at start-up and:

* prints it once, in the URL it tells the user to open (``http://127.0.0.1:PORT/?token=…``);
* writes it to a 0600 file in the user's runtime dir (:func:`runtime_dir`) for scripts, removed
  when the server stops;
* accepts it as ``?token=`` (answered with an HttpOnly cookie named after the port, so the
  page's own requests carry it and servers on other ports keep theirs), as that cookie, or
  as ``Authorization: Bearer``. Missing: 401; wrong: 403 (compared in constant time).

:func:`check` is framework-free (the dashboard's ASGI guard and FastLane's ``http.server``
use it); :class:`TokenWSGI` wraps a WSGI application (TensorBoard, optuna-dashboard).
"""

from __future__ import annotations

import atexit
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from mosaic_core.errors import UsageError
from mosaic_core.files import UntrustedPath, check_own_dir

__all__ = [
    "ServerToken",
    "TokenWSGI",
    "check",
    "cookie_name",
    "issue",
    "offered",
    "runtime_dir",
    "runtime_dir_hint",
    "serve_wsgi",
    "set_cookie",
]


def runtime_dir() -> Path:
    """A directory only we can enter, the first of ``$XDG_RUNTIME_DIR/mosaic``,
    ``/tmp/mosaic-<uid>`` and ``~/.cache/mosaic/runtime`` that is (or can be made) ours and 0700.
    Another user who squats ``/tmp/mosaic-<uid>`` (a link, their directory, a looser mode) only
    moves us on to the next; when none is usable, one line names each and why."""
    refused = []
    for path in _runtime_candidates():
        try:
            return _private_dir(path)
        except OSError as exc:
            refused.append(str(exc))
    raise UsageError("no private runtime dir for token files: " + "; ".join(refused))


def _runtime_candidates() -> list[Path]:
    base = os.environ.get("XDG_RUNTIME_DIR")
    found = [Path(base) / "mosaic"] if base and os.path.isdir(base) else []
    found.append(Path(tempfile.gettempdir()) / f"mosaic-{os.geteuid()}")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    found.append(Path(cache) / "mosaic" / "runtime")
    return found


def _private_dir(path: Path) -> Path:
    """``path`` made 0700 if absent, then checked: ours, not a link, closed to others."""
    try:
        os.makedirs(path.parent, 0o700, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise OSError(f"cannot make {path}: {exc.strerror}") from None
    check_own_dir(path, "runtime dir")
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & 0o077:
        raise UntrustedPath(f"runtime dir {path} is open to others (mode {mode:o})")
    return path


@dataclass
class ServerToken:
    """One server's token and the 0600 file that holds it while the server runs."""

    value: str
    file: Path | None

    def url(self, base: str) -> str:
        """``base`` (``http://host:port/…``) with the token for a browser."""
        return f"{base}{'&' if '?' in base else '?'}token={self.value}"

    def remove(self) -> None:
        if self.file is not None:
            try:
                os.unlink(self.file)
            except FileNotFoundError:
                pass
            self.file = None


def issue(server: str, port: int) -> ServerToken:
    """A new token for ``server`` listening on ``port``, written to
    ``<runtime dir>/<server>-<port>.token`` (0600, created new; removed at exit)."""
    value = secrets.token_urlsafe(24)
    path = runtime_dir() / f"{server}-{port}.token"
    try:
        os.unlink(path)  # a stale file of ours from a server that died on this port
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    token = ServerToken(value, path)
    atexit.register(token.remove)
    return token


def cookie_name(port: int) -> str:
    """Cookies ignore ports: each server's cookie carries its port in its name."""
    return f"mosaic_token_{port}"


def offered(query_string: str, headers: Mapping[str, str], cookie: str) -> tuple[str | None, bool]:
    """(the token a request offers or None, whether it came in the query). ``headers`` keys
    are lower-case."""
    query = parse_qs(query_string)
    if query.get("token"):
        return query["token"][0], True
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is the same as none
        return None, False
    return (jar[cookie].value if cookie in jar else None), False


def check(
    expected: str, query_string: str, headers: Mapping[str, str], cookie: str, command: str
) -> tuple[int, str, bool]:
    """(status, reason, came in the query): status 0 lets the request through; 401 without a
    token, 403 with a wrong one; the reason names ``command``'s printed URL."""
    if not expected:  # the server has not made its token yet
        return 503, "this server is starting: try again in a moment", False
    value, from_query = offered(query_string, headers, cookie)
    if value is None:
        return (
            401,
            (
                f"this server needs its token: open the URL `{command}` printed (it ends in ?token=...) "
                f"or send the token in {runtime_dir_hint()} as Authorization: Bearer"
            ),
            False,
        )
    if not secrets.compare_digest(value.encode(), expected.encode()):
        return 403, f"wrong token: use the one `{command}` printed when it started", False
    return 0, "", from_query


def runtime_dir_hint() -> str:
    return "its token file (in $XDG_RUNTIME_DIR/mosaic, /tmp/mosaic-<uid> or ~/.cache/mosaic/runtime)"


def set_cookie(token: str, cookie: str) -> str:
    return f"{cookie}={token}; Path=/; HttpOnly; SameSite=Strict"


_REASONS = {401: "Unauthorized", 403: "Forbidden", 503: "Service Unavailable"}


class TokenWSGI:
    """A WSGI application behind the token: nothing reaches ``app`` without it.

    For the third-party servers we start (TensorBoard, optuna-dashboard) we serve their WSGI
    application in our own process behind this gate rather than putting a proxy in front of
    their server: there is then only one listening socket and it is ours, so no port ever
    answers without the token, and there is no second hop to keep in sync (streaming, headers).
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], token: str, port: int, command: str):
        self.app, self.token, self.cookie, self.command = app, token, cookie_name(port), command

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        status, reason, from_query = check(
            self.token, environ.get("QUERY_STRING", ""), headers, self.cookie, self.command
        )
        if status:
            body = (reason + "\n").encode()
            start_response(
                f"{status} {_REASONS[status]}",
                [
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(body))),
                    ("Cache-Control", "no-store"),
                ],
            )
            return [body]
        if not from_query:
            return self.app(environ, start_response)

        def starting(status_line: str, response_headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(
                status_line, [*response_headers, ("Set-Cookie", set_cookie(self.token, self.cookie))], *exc_info
            )

        return self.app(environ, starting)


def serve_wsgi(
    app: Callable[..., Iterable[bytes]],
    port: int,
    server: str,
    command: str,
    announce: Callable[[str, ServerToken], None],
) -> int:
    """Serve a WSGI ``app`` behind a new token on 127.0.0.1:``port`` (threaded, stdlib
    ``wsgiref``) until Ctrl-C; ``announce(url_with_token, token)`` once it listens."""
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Threaded(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep stderr for our own lines
            pass

    gate = TokenWSGI(app, "", 0, command)
    try:
        httpd = make_server("127.0.0.1", port, gate, server_class=Threaded, handler_class=Quiet)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot listen on 127.0.0.1: {exc.strerror}") from None
    bound = httpd.server_address[1]
    token = issue(server, bound)
    gate.token, gate.cookie = token.value, cookie_name(bound)
    announce(token.url(f"http://127.0.0.1:{bound}/"), token)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        token.remove()
    return 0
