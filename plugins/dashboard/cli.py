"""``mosaic serve``: start the dashboard and print its URL.

    mosaic serve [--host 127.0.0.1] [--port 8765] [--runs-dir D] [--target HOST:PORT]

Every request needs the token made at start-up, on loopback too: it is printed in the URL
(open that one) and kept in a 0600 file of the user's runtime dir while the server runs. The server's modules (and starlette,
uvicorn, sse-starlette) are imported inside :func:`run` only.
"""

from __future__ import annotations

import argparse

from mosaic_core import CliCommand, UsageError

DEFAULT_PORT = 8765
WEB_MODULES = ("starlette", "uvicorn", "sse_starlette")


def command() -> CliCommand:
    return CliCommand(
        name="serve", help="a live web dashboard of runs (frames, curves, events, daemon)", configure=configure, run=run
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; every request needs the printed token)"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    parser.add_argument("--runs-dir", default=None, help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument(
        "--target", default=None, help="a trainer daemon HOST:PORT to submit, cancel and show its queue (default: none)"
    )
    parser.add_argument("--state-dir", default=None, help="the daemon's state dir (its client.token is read there)")
    parser.add_argument("--token-file", default=None, help="the daemon's client token file (or $MOSAIC_TOKEN)")


def missing_web_modules() -> list[str]:
    from importlib.util import find_spec

    return [name for name in WEB_MODULES if find_spec(name) is None]


def run(args: argparse.Namespace) -> int:
    missing = missing_web_modules()
    if missing:
        raise UsageError(f"mosaic serve needs {', '.join(missing)}: pip install 'mosaic-rl[web]'")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0..65535, got {args.port}")
    token = None
    if args.target is not None:
        from mosaic_core.toolkit import check_target, find_token

        check_target(args.target, "--target")
        token = find_token(args.token_file, args.state_dir)
    from mosaic_dashboard.server import serve

    return serve(host=args.host, port=args.port, runs_dir=args.runs_dir, target=args.target, daemon_token=token)
