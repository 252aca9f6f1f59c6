"""Dashboard benchmark; prints figures (nothing here is asserted).

    nice python bench/dashboard.py [--total-timesteps 40000] [--repeats 2]

A real ``mosaic serve`` and real PPO runs (bundled ``ppo``, CartPole-v1, FastLane on) through
``mosaic run``, with 0, 1 and 4 viewers connected, interleaved (0, 1, 4, 0, 1, 4, ...). A
viewer is what a browser on the run page opens: the run's SSE stream and its MJPEG frame
stream. Printed per setting (median over repeats): the training SPS (the script's own
``charts/SPS``) and its ratio to no viewer, the frames per second each viewer received and their share of the
frames the run published (1.0: every frame, at the run's native rate), the server's resident memory
(peak, from its ``/api/stats``). On a shared machine wall-clock SPS moves with the neighbours'
load, so the run's steps per CPU-second (host, training process and envs together) are printed
too, with the CPU seconds the server spent during the run: the viewers' whole cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._frames, daemon=True),
            threading.Thread(target=self._events, daemon=True),
        ]
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
        with response:
            while not self.stop.is_set() and response.readline():
                pass

    @property
    def fps(self) -> float | None:
        if self.frames < 2:
            return None
        return (self.frames - 1) / (self.last - self.first)

    def close(self) -> None:
        self.stop.set()


def count_published(run_id: str, done: threading.Event, seen: list[int]) -> None:
    """The frames the run published in all (read from its segment until the run ends)."""
    from mosaic_fastlane import FastLaneReader
    from mosaic_fastlane.segment import FastLaneError

    reader = None
    while not done.is_set() and reader is None:
        try:
            reader = FastLaneReader(run_id)
        except FastLaneError:
            time.sleep(0.05)
    if reader is None:
        return
    with reader:
        while not done.is_set() and not reader.ended():
            seen[0] = max(seen[0], reader.frames_published())
            time.sleep(0.02)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (from /proc)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), "serve", "--port", "0", "--runs-dir", str(workdir / "runs")],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ready = json.loads(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{ready['port']}"


def rss(base: str) -> int:
    with urllib.request.urlopen(base + "/api/stats", timeout=10) as response:
        return json.loads(response.read())["rss_bytes"]


def one_run(base: str, server_pid: int, workdir: Path, viewers: int, steps: int, index: int) -> dict:
    run_id = f"bench-{viewers}v-{index}"
    cmd = [
        str(BIN / "mosaic"),
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        str(steps),
        "--run-id",
        run_id,
        "--runs-dir",
        str(workdir / "runs"),
        "--quiet",
        "--extras",
        json.dumps({"fastlane": True}),
    ]
    run_cpu, server_cpu = children_cpu(), cpu_seconds(server_pid)
    events_path = workdir / f"{run_id}.jsonl"
    with open(events_path, "wb") as events:  # a file, not a pipe: a long run never blocks on it
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=events, stderr=subprocess.DEVNULL)
    watching = [Viewer(base, run_id) for _ in range(viewers)]
    done, published = threading.Event(), [0]
    counter = threading.Thread(target=count_published, args=(run_id, done, published), daemon=True)
    counter.start()
    peak = 0
    while proc.poll() is None:
        peak = max(peak, rss(base))
        time.sleep(0.5)
    proc.wait()
    output = events_path.read_text()
    run_cpu = children_cpu() - run_cpu  # the whole run: host, training process, its envs
    done.set()
    counter.join()
    sps = None
    for line in output.splitlines():
        event = json.loads(line)
        if event.get("event") == "metrics" and event["payload"].get("sps"):
            sps = event["payload"]["sps"]
    time.sleep(0.5)
    for viewer in watching:
        viewer.close()
    fps = [v.fps for v in watching if v.fps is not None]
    share = [v.frames / published[0] for v in watching] if published[0] else []
    return {
        "viewers": viewers,
        "sps": sps,
        "steps_per_cpu_s": steps / run_cpu,
        "server_cpu_s": cpu_seconds(server_pid) - server_cpu,
        "fps": statistics.median(fps) if fps else None,
        "delivered_share": statistics.median(share) if share else None,
        "published": published[0],
        "rss": peak,
    }


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
            results = [
                one_run(base, server.pid, workdir, n, args.total_timesteps, i)
                for i in range(args.repeats)
                for n in (0, 1, 4)
            ]
        finally:
            server.terminate()
            server.wait(timeout=20)
    print(
        f"PPO CartPole-v1, FastLane single, {args.total_timesteps} steps, {args.repeats} repeat(s), "
        f"{os.cpu_count()} CPU(s); server idle RSS {idle_rss / 2**20:.1f} MiB"
    )
    base_sps = statistics.median(r["sps"] for r in results if r["viewers"] == 0)
    base_cpu = statistics.median(r["steps_per_cpu_s"] for r in results if r["viewers"] == 0)
    print(
        f"{'viewers':>8} {'train SPS':>10} {'ratio':>7} {'steps/CPU-s':>12} {'ratio':>7} {'server CPU-s':>13} "
        f"{'frames/s per viewer':>20} {'share of published':>19} {'server peak RSS':>16}"
    )
    for n in (0, 1, 4):
        rows = [r for r in results if r["viewers"] == n]
        sps = statistics.median(r["sps"] for r in rows)
        per_cpu = statistics.median(r["steps_per_cpu_s"] for r in rows)
        server_cpu = statistics.median(r["server_cpu_s"] for r in rows)
        fps = [r["fps"] for r in rows if r["fps"] is not None]
        fps_text = f"{statistics.median(fps):.1f}" if fps else "-"
        shares = [r["delivered_share"] for r in rows if r["delivered_share"] is not None]
        share_text = f"{statistics.median(shares):.3f}" if shares else "-"
        peak = max(r["rss"] for r in rows) / 2**20
        print(
            f"{n:>8} {sps:>10.0f} {sps / base_sps:>7.3f} {per_cpu:>12.0f} {per_cpu / base_cpu:>7.3f} "
            f"{server_cpu:>13.2f} {fps_text:>20} {share_text:>19} {peak:>13.1f} MiB"
        )
    print(
        "each run:",
        json.dumps([{k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()} for r in results]),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
