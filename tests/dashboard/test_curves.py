"""A run's curves on the dashboard are every episode it recorded, live while it trains: a real
CleanRL PPO run polled through ``/api/runs/ID/curves`` and followed through its SSE stream, both
checked against its TensorBoard files read here with TensorBoard's own ``EventAccumulator``."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from .conftest import BIN, authed, child_env, http_json

pytestmark = pytest.mark.slow


def tensorboard(run_dir, tag: str) -> list[list[float]]:
    (folder,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [[e.step, e.value] for e in accumulator.Scalars(tag)]


class Stream:
    """A run's SSE stream read on a thread: the page's curves, rebuilt as app.js rebuilds them."""

    def __init__(self, url: str):
        self.curves: dict[str, list[list[float]]] = {}
        self.names: list[str] = []
        self.response = urllib.request.urlopen(authed(url), timeout=300)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        name = None
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:") and name:
                    self._on(name, json.loads(line[5:].strip()))
        except (OSError, ValueError, AttributeError):  # closed by the test
            return

    def _on(self, name: str, data: dict) -> None:
        self.names.append(name)
        if name in ("snapshot", "curves"):
            self.curves = data["curves"]
        elif name in ("points", "recorded"):
            for series, points in data.items():
                self.curves.setdefault(series, []).extend([points] if name == "points" else points)

    def close(self) -> None:
        self.response.close()


def test_a_runs_curve_is_every_episode_it_recorded_live_and_at_the_end(serve, workdir):
    base, _server = serve()
    run_dir = workdir / "var/trainer/runs/live-curve"
    extras = {"num_envs": 2, "num_steps": 128, "save_model": False, "cuda": False}
    args = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "30000"]
    args += ["--run-id", "live-curve", "--quiet", "--extras", json.dumps(extras)]
    process = subprocess.Popen(
        [str(BIN / "mosaic"), *args],
        cwd=workdir,
        env=child_env(workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[list[list[float]]] = []  # the API's episodic_return while the run trained
    stream = None
    try:
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            status, body = http_json(f"{base}/api/runs/live-curve/curves")
            if status == 200 and "episodic_return" in body["recorded"]:
                seen.append(body["curves"]["episodic_return"])
                stream = stream or Stream(f"{base}/api/runs/live-curve/stream")
            time.sleep(0.3)
        assert process.wait(timeout=300) == 0, process.stderr.read()[-3000:]
        final = tensorboard(run_dir, "charts/episodic_return")
        assert any(0 < len(points) < len(final) for points in seen), [len(p) for p in seen]  # live, and growing
        assert all(points == final[: len(points)] for points in seen)  # each look: the episodes so far, once each
        status, body = http_json(f"{base}/api/runs/live-curve/curves")
        assert body["curves"]["episodic_return"] == final
        assert body["curves"]["episodic_length"] == tensorboard(run_dir, "charts/episodic_length")
        assert body["curves"]["sps"] == tensorboard(run_dir, "charts/SPS")  # every iteration's, not the events'
        assert "episodic_return_smoothed" not in body["curves"]
        # the stream: the page's curve is the same, grown by the run's records while it trained
        assert stream is not None
        deadline = time.monotonic() + 30
        while stream.curves.get("episodic_return") != final and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stream.curves.get("episodic_return") == final, len(stream.curves.get("episodic_return", []))
        assert "recorded" in stream.names  # new episodes were appended as they came
    finally:
        if stream is not None:
            stream.close()
        if process.poll() is None:
            process.kill()
