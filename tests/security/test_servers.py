"""Issue 30, parts 1 and 4 of the report: every web server MOSAIC starts needs its token on
loopback too. Any local user can find a loopback port (``/proc/net/tcp``) and connect; the
attacker here is uid 65534 and tries what worked before: the dashboard's cancel, submit,
run list and script-reading form; FastLane's live frame and metrics; TensorBoard's data;
optuna-dashboard's study API (it can edit studies). Each server's 0600 token file is
unreadable to it. With the token (the owner) each answers, so the test can fail."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import BIN
from tests.trainer.second_user import needs_second_user, run_as_nobody

# GET/POST each URL without a token (and with a guessed one); print {url: status or errno}.
PROBE = r"""
import json, sys, urllib.request, urllib.error
out = {}
for spec in sys.argv[1:]:
    method, url = spec.split(" ", 1)
    if method == "READ":
        try:
            open(url).read(); out[spec] = "READ"
        except OSError as exc:
            out[spec] = exc.errno
        continue
    for label, headers in (("", {}), (" guessed", {"Authorization": "Bearer guess"})):
        request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None,
                                         headers={**headers, "X-Mosaic-Dashboard": "1", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                out[spec + label] = response.status
        except urllib.error.HTTPError as exc:
            out[spec + label] = exc.code
print(json.dumps(out))
"""


def _probe(*specs: str) -> dict[str, object]:
    result = run_as_nobody([sys.executable, "-c", PROBE, *specs])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _owner_get(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _started(argv: list[str], cwd: Path, pattern: str, timeout: float = 120) -> tuple[subprocess.Popen, re.Match]:
    """Start a server; wait for the stderr line matching ``pattern`` (its URL with the token)."""
    log = cwd / f"server-{time.monotonic_ns()}.log"
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return proc, found
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{argv} printed no URL: {log.read_text(errors='replace')[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


URL = r"(http://127\.0\.0\.1:(\d+)/)\?token=([\w-]+)"
TOKEN_FILE = r"token is also in (\S+) "


@needs_second_user
def test_dashboard_fastlane_watch_and_tensorboard_refuse_another_user(tmp_path):
    runs = tmp_path / "var" / "trainer" / "runs"
    run = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "400000",
            "--run-id",
            "live",
            "--quiet",
            "--extras",
            json.dumps({"fastlane": True}),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    servers: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 120
        while not list((runs / "live").rglob("events.out.tfevents*")) and time.monotonic() < deadline:
            time.sleep(0.5)
        serve = subprocess.Popen(
            [str(BIN / "mosaic"), "serve", "--port", "0", "--runs-dir", str(runs)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        servers.append(serve)
        ready = json.loads(serve.stdout.readline())
        dash, dash_token = ready["url"].split("?token=")
        watch, found = _started([str(BIN / "mosaic"), "fastlane", "watch", "live", "--port", "0"], tmp_path, URL)
        servers.append(watch)
        watch_url, watch_token = found.group(1), found.group(3)
        board, found = _started(
            [str(BIN / "mosaic"), "tensorboard", "live", "--port", "0"], tmp_path, URL + r".*?" + TOKEN_FILE
        )
        servers.append(board)
        board_url, board_token, board_file = found.group(1), found.group(3), found.group(4)

        found = _probe(
            f"GET {dash}api/runs",
            f"GET {dash}api/runs/live/logs",
            f"POST {dash}api/runs/live/cancel",
            f"POST {dash}api/daemon/submit",
            f"GET {dash}api/daemon/form?algo=/etc/shadow",
            f"GET {watch_url}metrics.json",
            f"GET {watch_url}frame.png",
            f"GET {watch_url}",
            f"GET {board_url}data/runs",
            f"GET {board_url}",
            f"READ {ready['token_file']}",
            f"READ {board_file}",
        )
        statuses = {k: v for k, v in found.items() if not k.startswith("READ")}
        assert {v for k, v in statuses.items() if "guessed" not in k} == {401}, found
        assert {v for k, v in statuses.items() if "guessed" in k} == {403}, found
        assert found[f"READ {ready['token_file']}"] == 13 and found[f"READ {board_file}"] == 13, found
        assert run.poll() is None  # the run was not cancelled
        # The owner, with each server's token, is served.
        assert _owner_get(f"{dash}api/runs", dash_token) == 200
        assert _owner_get(f"{watch_url}metrics.json", watch_token) == 200
        assert _owner_get(f"{board_url}data/runs", board_token) == 200
        for path in (Path(ready["token_file"]), Path(board_file)):
            assert path.stat().st_mode & 0o077 == 0 and path.parent.stat().st_mode & 0o077 == 0
    finally:
        for server in servers:
            _stop(server)
        run.send_signal(signal.SIGINT)
        run.wait(timeout=120)
    assert not Path(ready["token_file"]).exists() and not Path(board_file).exists()  # removed at exit


@needs_second_user
def test_sweep_dashboard_refuses_another_user(tmp_path):
    pytest.importorskip("optuna_dashboard", reason="optuna-dashboard is not installed (the test extra has it)")
    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="shared", storage=storage)
    study.enqueue_trial({"x": 0.5})
    board, found = _started(
        [str(BIN / "mosaic"), "sweep", "dashboard", "shared", "--storage", storage, "--port", "0"],
        tmp_path,
        URL + r".*?" + TOKEN_FILE,
    )
    try:
        url, token, token_file = found.group(1), found.group(3), found.group(4)
        found = _probe(
            f"GET {url}api/studies", f"POST {url}api/studies/0/trials/0/tell", f"GET {url}", f"READ {token_file}"
        )
        statuses = {k: v for k, v in found.items() if not k.startswith("READ")}
        assert {v for k, v in statuses.items() if "guessed" not in k} == {401}, found
        assert {v for k, v in statuses.items() if "guessed" in k} == {403}, found
        assert found[f"READ {token_file}"] == 13
        assert _owner_get(f"{url}api/studies", token) == 200
    finally:
        _stop(board)
    assert len(optuna.load_study(study_name="shared", storage=storage).trials) == 1


@needs_second_user
def test_a_squatted_tmp_runtime_dir_only_moves_the_token_file_home(tmp_path, request):
    """Another user who makes ``/tmp/mosaic-<our uid>`` first (theirs, 0777) cannot stop our
    servers from starting nor see their tokens: the token file goes to ``~/.cache`` instead."""
    shared = Path(tempfile.mkdtemp(prefix="mosaic-shared-"))  # like /tmp: sticky, everyone's
    shared.chmod(0o1777)
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    squat = shared / f"mosaic-{os.geteuid()}"
    made = run_as_nobody(
        [sys.executable, "-c", f"import os; os.mkdir({str(squat)!r}); os.chmod({str(squat)!r}, 0o777)"]
    )
    assert made.returncode == 0, made.stderr
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    env.update(TMPDIR=str(shared), XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = "from mosaic_core.webtoken import issue; t = issue('serve', 1234); print(t.file)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    token_file = Path(result.stdout.strip())
    assert token_file.parent == tmp_path / "cache" / "mosaic" / "runtime"
    assert not any(squat.iterdir())
