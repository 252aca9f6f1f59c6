"""Fixtures: the real ``mosaic serve`` and ``mosaic daemon`` as subprocesses, and a real
headless Chromium (Debian's /usr/bin/chromium driven by playwright, no downloaded browser)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HOST_VARS

BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytest.importorskip("starlette", reason="the [web] extra (starlette, uvicorn, sse-starlette) is not installed")


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def child_env(workdir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    env.update({"PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline", **extra})
    return env


@dataclass
class Process:
    """A started console script, its first JSON line (the ready line) and its stderr file."""

    proc: subprocess.Popen
    ready: dict[str, Any]
    stderr_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start(args: list[str], workdir: Path, name: str, timeout: float = 60.0) -> Process:
    """Start ``mosaic ARGS`` and wait for its first stdout line (a JSON ready event)."""
    stderr_path = workdir / f"{name}.stderr.log"
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *args],
        cwd=workdir,
        env=child_env(workdir),
        stdout=subprocess.PIPE,
        stderr=open(stderr_path, "wb"),
        text=True,
    )
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline and not line:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
    if not line:
        proc.kill()
        pytest.fail(f"mosaic {' '.join(args)} printed no ready line: {stderr_path.read_text(errors='replace')[-2000:]}")
    return Process(proc, json.loads(line), stderr_path)


@pytest.fixture
def workdir() -> Path:
    """A short scratch dir (FastLane names and sockets stay short)."""
    path = Path(tempfile.mkdtemp(prefix="dash-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def processes():
    """Started processes are stopped at the end; a server traceback fails the test."""
    started: list[Process] = []
    yield started
    for process in reversed(started):
        process.stop()
    for process in started:
        assert "Traceback" not in process.stderr, f"a traceback on stderr:\n{process.stderr[-3000:]}"
        assert "ERROR:" not in process.stderr, f"an error logged on stderr:\n{process.stderr[-3000:]}"


@pytest.fixture
def serve(workdir: Path, processes: list[Process]):
    """``serve(*extra_args)`` → (base URL, Process) of a real ``mosaic serve --port 0``."""

    def run(*extra: str) -> tuple[str, Process]:
        args = ["serve", "--port", "0", "--runs-dir", str(workdir / "var/trainer/runs"), *extra]
        process = start(args, workdir, "serve")
        processes.append(process)
        base = f"http://127.0.0.1:{process.ready['port']}"
        TOKENS[base] = process.ready["url"].split("?token=", 1)[1]
        return base, process

    return run


@pytest.fixture
def daemon(workdir: Path, processes: list[Process]) -> Process:
    """A real ``mosaic daemon`` on a free loopback port, state under ``workdir/var/trainer``."""
    process = start(
        ["daemon", "--listen", "127.0.0.1:0", "--state-dir", str(workdir / "var/trainer"), "--grace-period", "2"],
        workdir,
        "daemon",
    )
    processes.append(process)
    return process


# Every `mosaic serve` needs its token, on loopback too: base URL -> the token it printed.
TOKENS: dict[str, str] = {}


def authed(url: str) -> urllib.request.Request:
    """A GET of ``url`` carrying its server's token (for streams read with urlopen)."""
    known = next((value for base, value in TOKENS.items() if url.startswith(base + "/")), None)
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {known}"} if known else {})


def http(
    url: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    token: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; HTTP errors are answers, not exceptions. The
    server's token is sent as ``Authorization: Bearer`` unless ``token=False`` or the request
    carries credentials of its own."""
    headers = dict(headers or {})
    if token and not {"authorization", "cookie"} & {k.lower() for k in headers}:
        known = next((value for base, value in TOKENS.items() if url.startswith(base + "/")), None)
        if known:
            headers["Authorization"] = f"Bearer {known}"
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def http_json(url: str, **kwargs: Any) -> tuple[int, Any]:
    status, _headers, body = http(url, **kwargs)
    return status, json.loads(body)


def post_json(url: str, data: Any, **kwargs: Any) -> tuple[int, Any]:
    return http_json(
        url,
        method="POST",
        body=json.dumps(data).encode(),
        headers={"Content-Type": "application/json", "X-Mosaic-Dashboard": "1"},
        **kwargs,
    )


@pytest.fixture
def browser(tmp_path: Path):
    """A real headless Chromium page (Debian's package, launched by playwright)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed: `make browser-deps` installs it (CI does)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: `make browser-deps` installs it (CI does)"
    )
    profile = tmp_path / "chromium-profile"
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where a browser test saves its screenshots (under pytest's tmp dir)."""
    path = tmp_path / "screenshots"
    path.mkdir()
    return path
