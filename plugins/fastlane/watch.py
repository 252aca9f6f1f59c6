"""``mosaic fastlane watch``: a live page on 127.0.0.1, or frames drawn in the terminal."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mosaic_core import MosaicError, UsageError, webtoken
from mosaic_core.jsontext import dumps
from mosaic_fastlane.frames import encode_png, terminal_image
from mosaic_fastlane.reader import FastLaneReader, Frame

PAGE = """<!doctype html><meta charset="utf-8"><title>FastLane %(run_id)s</title>
<style>body{font:14px system-ui,sans-serif;background:#111;color:#ddd;margin:1em}
img{image-rendering:pixelated;max-width:95vw;max-height:80vh;border:1px solid #333}td{padding:0 1em 0 0}</style>
<h3>FastLane &middot; run %(run_id)s &middot; <span id="state">live</span></h3>
<img id="frame" alt="waiting for the first frame"><table id="metrics"></table>
<script>
let last = -1;
async function tick() {
  let m;
  try { m = await (await fetch("metrics.json?" + Date.now())).json(); } catch (e) { setTimeout(tick, 1000); return; }
  if (m.frame_number !== undefined && m.frame_number !== last) {
    last = m.frame_number; document.getElementById("frame").src = "frame.png?n=" + last;
  }
  document.getElementById("metrics").innerHTML = Object.entries(m).map(
    ([k, v]) => `<tr><td>${k}</td><td>${typeof v === "number" ? +v.toFixed(3) : v}</td></tr>`).join("");
  if (m.ended) { document.getElementById("state").textContent = "run ended"; return; }
  setTimeout(tick, %(interval_ms)d);
}
tick();
</script>"""


class FrameSource:
    """The newest frame, re-read at most once per publish and PNG-encoded once per frame."""

    def __init__(self, reader: FastLaneReader):
        self.reader = reader
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._png: bytes | None = None
        self.ended = False

    def poll(self) -> Frame | None:
        with self._lock:
            if not self.ended:
                self.ended = self.reader.ended()
                seen = self._frame.frame_number if self._frame else 0
                if self.reader.frames_published() > seen:
                    frame = self.reader.latest()
                    if frame is not None:
                        self._frame, self._png = frame, None
            return self._frame

    def png(self) -> bytes | None:
        frame = self.poll()
        with self._lock:
            if frame is not None and self._png is None:
                self._png = encode_png(frame.pixels, level=1)
            return self._png

    def metrics(self) -> dict[str, Any]:
        frame = self.poll()
        return {"run_id": self.reader.header.run_id, "ended": self.ended, **(frame.metrics() if frame else {})}


class _Gate:
    """The server's token and cookie name, set once it listens (until then: 503 for all)."""

    token = ""
    cookie = ""


def _handler(source: FrameSource, page: bytes, gate: _Gate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            status, reason, from_query = webtoken.check(
                gate.token, query, {k.lower(): v for k, v in self.headers.items()}, gate.cookie, "mosaic fastlane watch"
            )
            if status:
                self._send(status, "text/plain; charset=utf-8", (reason + "\n").encode())
                return
            self._cookie = webtoken.set_cookie(gate.token, gate.cookie) if from_query else None
            if path == "/":
                self._send(200, "text/html; charset=utf-8", page)
            elif path == "/metrics.json":
                self._send(200, "application/json", dumps(source.metrics()).encode())
            elif path == "/frame.png":
                png = source.png()
                self._send(200, "image/png", png) if png else self._send(404, "text/plain", b"no frame yet\n")
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            cookie = getattr(self, "_cookie", None)
            if cookie:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # keep stderr for our own lines
            pass

    return Handler


def watch(args: argparse.Namespace, reader: FastLaneReader) -> int:
    with reader:
        if args.terminal:
            return _watch_terminal(args, reader)
        return _serve(args, reader)


def _serve(args: argparse.Namespace, reader: FastLaneReader) -> int:
    source = FrameSource(reader)
    page = (PAGE % {"run_id": reader.header.run_id, "interval_ms": max(50, int(reader.header.interval_ms))}).encode()
    gate = _Gate()
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(source, page, gate))
    except OSError as exc:
        raise UsageError(f"--port {args.port}: cannot listen on 127.0.0.1: {exc.strerror}") from None
    port = server.server_address[1]
    # Any local user can reach a loopback port: every request needs this token (the frames and
    # metrics of a run are its owner's).
    token = webtoken.issue("fastlane-watch", port)
    gate.token, gate.cookie = token.value, webtoken.cookie_name(port)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="fastlane-watch", daemon=True)
    thread.start()
    print(
        f"FastLane: watching run {reader.header.run_id} at {token.url(f'http://127.0.0.1:{port}/')} "
        f"(the token is also in {token.file} while this runs; Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not source.ended:
            source.poll()
            time.sleep(0.5)
        print(f"FastLane: run {reader.header.run_id} has ended", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        token.remove()
    return 0


def _watch_terminal(args: argparse.Namespace, reader: FastLaneReader) -> int:
    shown, seen = 0, 0
    interactive = sys.stdout.isatty()
    if interactive:
        sys.stdout.write("\x1b[2J")
    try:
        while args.frames <= 0 or shown < args.frames:
            frame = reader.wait(after=seen, timeout=args.timeout if shown == 0 else 3600)
            if frame is None:
                if reader.ended():
                    print(f"FastLane: run {reader.header.run_id} has ended", file=sys.stderr)
                    return 0
                if shown == 0:
                    raise MosaicError(f"run {reader.header.run_id} published no frame within {args.timeout:g} s")
                continue
            seen = frame.frame_number
            shown += 1
            metrics = (
                f"step {frame.global_step}  episodes {frame.episode_count}  reward {frame.last_reward:.3g}  "
                f"return {'-' if frame.rolling_return is None else f'{frame.rolling_return:.1f}'}  "
                f"{frame.step_rate_hz:.0f} steps/s  frame {frame.frame_number}"
            )
            sys.stdout.write(
                ("\x1b[H" if interactive else "") + terminal_image(frame.pixels, args.columns) + "\n" + metrics + "\n"
            )
            sys.stdout.flush()
            time.sleep(reader.header.interval_ms / 1000.0)
    except KeyboardInterrupt:
        pass
    return 0
