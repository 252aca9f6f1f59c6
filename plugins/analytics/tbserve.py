"""``mosaic tensorboard``'s server: TensorBoard's own WSGI application behind our token.

TensorBoard is built with a ``server_class`` that wraps its application in
:class:`mosaic_core.webtoken.TokenWSGI` before TensorBoard's werkzeug server binds: the only
socket is ours-with-a-token (no proxy in front of an open TensorBoard port, see TokenWSGI).
"""

from __future__ import annotations

import sys
from typing import Any

from mosaic_core import webtoken


def serve_tensorboard(logdir: str, port: int, logdir_flag: str = "--logdir") -> int:
    """Serve ``logdir`` on 127.0.0.1:``port`` (0: any free one) until Ctrl-C; prints the URL
    with its token on stderr. ``logdir_flag="--logdir_spec"`` takes ``name:dir,name:dir``."""
    from tensorboard import program

    def server_class(app: Any, flags: Any) -> Any:
        gate = webtoken.TokenWSGI(app, "", 0, "mosaic tensorboard")  # no token yet: refuses all
        server = program.create_port_scanning_werkzeug_server(gate, flags)
        token = webtoken.issue("tensorboard", server.server_port)
        gate.token, gate.cookie = token.value, webtoken.cookie_name(server.server_port)
        url = token.url(server.get_url())

        def print_serving_message() -> None:
            print(
                f"mosaic tensorboard: TensorBoard at {url} (the token is also in {token.file} while it runs; "
                "Ctrl-C stops it)",
                file=sys.stderr,
                flush=True,
            )

        server.print_serving_message = print_serving_message
        return server

    board = program.TensorBoard(server_class=server_class)
    board.configure(argv=[None, logdir_flag, logdir, "--host", "127.0.0.1", "--port", str(port)])
    return int(board.main() or 0)
