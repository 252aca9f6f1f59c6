"""Dashboard benchmark; prints figures (nothing here is asserted).

    nice python bench/dashboard.py [--total-timesteps 40000] [--repeats 2]

A real ``mosaic serve`` and real PPO runs (bundled ``ppo``, CartPole-v1, FastLane on) through
``mosaic run``, with 0, 1 and 4 viewers connected, interleaved (0, 1, 4, 0, 1, 4, ...). A
viewer is what a browser on the run page opens: the run's SSE stream and its MJPEG frame
stream. Printed per setting (median over repeats): the training SPS (the script's own
``charts/SPS``) and its ratio to no viewer, the frames per second each viewer received next to
the frames per second the run published (its native rate), and the server's resident memory
(peak, from its ``/api/stats``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


class Viewer:
    """One page's worth of streams for a run: SSE events and MJPEG frames, counted."""

    def __init__(self, base: str, run_id: str):
        self.base, self.run_id = base, run_id
        self.frames = 0
        self.first = self.last = None
        self.published: list[tuple[float, int]] = []  # (time, frames the run had published)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._frames, daemon=True),
                        threading.Thread(target=self._events, daemon=True)]
        for thread in self.threads:
            thread.start()

    def _open(self, path: str):
        while not self.stop.is_set():
            try:
                return urllib.request.urlopen(f"{self.base}/api/runs/{self.run_id}/{path}", timeout=60)
            except urllib.error.HTTPError:
                time.sleep(0.1)  # no run dir or no segment yet
        return None

    def _frames(self) -> None:
        response = self._open("frames.mjpg")
        if response is None:
            return
        length = None
        with response:
            while not self.stop.is_set():
                line = response.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
                elif line == b"\r\n" and length:
                    response.read(length)
                    length = None
                    self.frames += 1
                    self.last = time.monotonic()
                    self.first = self.first or self.last

    def _events(self) -> None:
        response = self._open("stream")
        if response is None:
            return
        event = None
        with response:
            while not self.stop.is_set():
                line = response.readline()
                if not line:
                    return
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                elif line.startswith(b"data:") and event == b"fastlane":
                    status = json.loads(line[5:])
                    if status.get("available") and not status.get("ended") and status["frames_published"]:
                        self.published.append((time.monotonic(), status["frames_published"]))

    @property
    def published_fps(self) -> float | None:
        if len(self.published) < 2:
            return None
        (t0, n0), (t1, n1) = self.published[0], self.published[-1]
        return (n1 - n0) / (t1 - t0)

    @property
    def fps(self) -> float | None:
        if self.frames < 2:
            return None
        return (self.frames - 1) / (self.last - self.first)

    def close(self) -> None:
        self.stop.set()


def start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(BIN / "mosaic"), "serve", "--port", "0", "--runs-dir", str(workdir / "runs")],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready = json.loads(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{ready['port']}"


def rss(base: str) -> int:
    with urllib.request.urlopen(base + "/api/stats", timeout=10) as response:
        return json.loads(response.read())["rss_bytes"]


def one_run(base: str, workdir: Path, viewers: int, steps: int, index: int) -> dict:
    run_id = f"bench-{viewers}v-{index}"
    cmd = [str(BIN / "mosaic"), "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1",
           "--total-timesteps", str(steps), "--run-id", run_id, "--runs-dir", str(workdir / "runs"), "--quiet",
           "--extras", json.dumps({"fastlane": True})]
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watching = [Viewer(base, run_id) for _ in range(viewers)]
    peak = 0
    while proc.poll() is None:
        peak = max(peak, rss(base))
        time.sleep(0.5)
    sps = None
    for line in proc.stdout.read().splitlines():
        event = json.loads(line)
        if event.get("event") == "metrics" and event["payload"].get("sps"):
            sps = event["payload"]["sps"]
    time.sleep(0.5)
    for viewer in watching:
        viewer.close()
    fps = [v.fps for v in watching if v.fps is not None]
    published = [v.published_fps for v in watching if v.published_fps is not None]
    return {"viewers": viewers, "sps": sps, "fps": statistics.median(fps) if fps else None,
            "published_fps": statistics.median(published) if published else None, "rss": peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-timesteps", type=int, default=40000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dash-bench-") as tmp:
        workdir = Path(tmp)
        server, base = start_server(workdir)
        try:
            idle_rss = rss(base)
            results = [one_run(base, workdir, n, args.total_timesteps, i)
                       for i in range(args.repeats) for n in (0, 1, 4)]
        finally:
            server.terminate()
            server.wait(timeout=20)
    print(f"PPO CartPole-v1, FastLane single, {args.total_timesteps} steps, {args.repeats} repeat(s), "
          f"{os.cpu_count()} CPU(s); server idle RSS {idle_rss / 2**20:.1f} MiB")
    base_sps = statistics.median(r["sps"] for r in results if r["viewers"] == 0)
    print(f"{'viewers':>8} {'train SPS':>10} {'ratio':>7} {'frames/s per viewer':>20} {'published/s':>12} "
          f"{'server peak RSS':>16}")
    for n in (0, 1, 4):
        rows = [r for r in results if r["viewers"] == n]
        sps = statistics.median(r["sps"] for r in rows)
        fps = [r["fps"] for r in rows if r["fps"] is not None]
        fps_text = f"{statistics.median(fps):.1f}" if fps else "-"
        published = [r["published_fps"] for r in rows if r["published_fps"] is not None]
        published_text = f"{statistics.median(published):.1f}" if published else "-"
        peak = max(r["rss"] for r in rows) / 2**20
        print(f"{n:>8} {sps:>10.0f} {sps / base_sps:>7.3f} {fps_text:>20} {published_text:>12} {peak:>13.1f} MiB")
    print("each run:", json.dumps([{k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}
                                   for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
