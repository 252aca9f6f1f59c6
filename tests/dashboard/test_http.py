"""The real ``mosaic serve`` over HTTP: token gate, loopback guard, bad input answered with a
status and a reason (never a traceback; the ``processes`` fixture checks stderr), the daemon
not configured or gone, malformed forms, and the streams of a real FastLane run."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import BIN, authed, child_env, http, http_json, post_json


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_loopback_needs_the_token_too_and_refuses_foreign_host_headers(serve):
    base, server = serve()
    url = server.ready["url"]
    token = url.split("?token=", 1)[1]
    assert server.ready["token_required"] is True and url == f"{base}/?token={token}"
    # Any local user can reach a loopback port: without the token, nothing answers.
    for path in ("/", "/api/runs", "/api/runs/stream", "/static/app.js", "/api/daemon"):
        status, _h, body = http(base + path, token=False)
        assert status == 401 and b"needs its token" in body, path
    status, _headers, body = http(base + "/")
    assert status == 200 and b"MOSAIC dashboard" in body
    status, data = http_json(
        base + "/api/runs", headers={"Host": "rebind.example.com", "Authorization": f"Bearer {token}"}
    )
    assert status == 403 and "is not loopback" in data["error"]
    # The token file: 0600 in the user's runtime dir while the server runs, gone after.
    token_file = Path(server.ready["token_file"])
    assert token_file.read_text().strip() == token and token_file.stat().st_mode & 0o077 == 0
    server.stop()
    assert not token_file.exists()


def test_beyond_loopback_every_request_needs_the_token(serve, workdir):
    _base, server = serve("--host", "0.0.0.0")
    url, port = server.ready["url"], server.ready["port"]
    token = url.split("?token=", 1)[1]
    base = f"http://127.0.0.1:{port}"
    cookie = f"mosaic_token_{port}"
    for path in ("/", "/api/runs", "/api/runs/stream", "/static/app.js", "/api/daemon"):
        status, _h, body = http(base + path, token=False)
        assert status == 401 and b"needs its token" in body, path
    status, data = http_json(base + "/api/runs", headers={"Authorization": "Bearer wrong"})
    assert status == 403 and "wrong token" in data["error"]
    status, headers, _body = http(f"{base}/?token={token}", token=False)
    assert status == 200 and f"{cookie}={token}" in headers["set-cookie"] and "HttpOnly" in headers["set-cookie"]
    assert http(base + "/api/runs", headers={"Cookie": f"{cookie}={token}"})[0] == 200
    assert http(base + "/api/runs", headers={"Authorization": f"Bearer {token}"})[0] == 200
    # Printed once on stdout; on disk only in the 0600 token file of the runtime dir.
    assert token not in server.stderr
    for path in Path(workdir).rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_bad_requests_get_a_status_and_a_reason(serve):
    base, _server = serve()
    status, data = http_json(base + "/api/runs/no-such-run/stream")
    assert status == 404 and "no run no-such-run under" in data["error"]
    status, data = http_json(base + "/api/runs/..%2F..%2Fetc/logs")
    assert status == 404
    status, data = http_json(base + "/api/runs/bad$id/curves")
    assert status == 404 and "is not a run id" in data["error"]
    status, data = http_json(base + "/api/nothing-here")
    assert status == 404 and "no such endpoint" in data["error"]
    status, data = http_json(base + "/api/daemon/submit", method="POST", body=b"{}")
    assert status == 403 and "X-Mosaic-Dashboard" in data["error"]
    status, data = post_json(base + "/api/runs/x/cancel", {})
    assert status == 409 and "no trainer daemon configured" in data["error"]
    status, data = post_json(base + "/api/runs/bad$id/cancel", {})
    assert status == 404 and "is not a run id" in data["error"]


def test_malformed_forms_and_a_daemon_that_is_gone(serve):
    base, _server = serve("--target", f"127.0.0.1:{free_port()}")  # nothing listens there
    good = {
        "worker": "cleanrl",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": "1000",
        "args": {"learning_rate": "0.001"},
    }
    bad = [
        ({**good, "total_timesteps": "lots"}, "total_timesteps: 'lots' is not a whole number"),
        ({**good, "total_timesteps": "0"}, "total_timesteps: must be > 0"),
        ({**good, "env_id": ""}, "env_id: required"),
        ({**good, "run_id": "a/b"}, "run_id:"),
        ({**good, "args": {"learning_rate": "fast"}}, "args.learning_rate: 'fast' is not a number"),
        ({**good, "args": {"anneal_lr": "maybe"}}, "args.anneal_lr: 'maybe' is not true or false"),
        ({**good, "args": {"no_such_field": "1"}}, "args.no_such_field: not an option of ppo"),
        ({**good, "algo": "no_such_algo"}, "algo:"),
        ([1, 2], "the form must be sent as a JSON object"),
    ]
    for form, reason in bad:
        status, data = post_json(base + "/api/daemon/submit", form)
        assert status == 400 and reason in data["error"], (form, data)
    status, _h, body = http(
        base + "/api/daemon/submit", method="POST", body=b"{not json", headers={"X-Mosaic-Dashboard": "1"}
    )
    assert status == 400 and b"must be sent as JSON" in body
    status, data = post_json(base + "/api/daemon/submit", good)
    assert status == 503 and "no trainer daemon answered" in data["error"]
    status, data = http_json(base + "/api/daemon")
    assert status == 200 and data["ok"] is False and "no trainer daemon answered" in data["error"]
    status, data = post_json(base + "/api/runs/some-run/cancel", {})
    assert status == 503 and "no trainer daemon answered" in data["error"]


def test_the_form_comes_from_the_workers_capabilities_and_the_args(serve, daemon):
    base, _server = serve("--target", daemon.ready["listen_address"])
    status, schema = http_json(base + "/api/daemon/form?worker=cleanrl&algo=dqn")
    assert status == 200 and schema["algo"] == "dqn" and "ppo" in schema["algos"]
    assert schema["capabilities"]["worker_type"] == "cleanrl"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["learning_rate"]["kind"] == "float" and fields["buffer_size"]["kind"] == "int"
    assert "env_id" not in fields and "total_timesteps" not in fields  # the form's own fields
    status, schema = http_json(base + "/api/daemon/form?worker=example")  # any worker, from its own options
    assert status == 200 and schema["algos"] == ["random", "first"] and schema["fields"] == []
    assert schema["capabilities"]["worker_type"] == "example" and "cleanrl" in schema["workers"]
    status, data = http_json(base + "/api/daemon/form?worker=nope")
    assert status == 404 and "no active worker 'nope'" in data["error"]
    daemon.stop()  # the daemon goes away: answers say so, the server keeps serving
    status, data = http_json(base + "/api/daemon/form")
    assert status == 503 and "no trainer daemon answered" in data["error"]
    assert http(base + "/api/runs")[0] == 200


def read_sse(url: str, until: str, timeout: float = 120.0) -> list[tuple[str, dict]]:
    """SSE events of ``url`` up to and including the first whose name or data holds ``until``."""
    events, name = [], None
    with urllib.request.urlopen(authed(url), timeout=timeout) as response:
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:") and name:
                data = json.loads(line[5:].strip())
                events.append((name, data))
                if until == name or until in line:
                    return events
    return events


@pytest.mark.slow
def test_streams_of_a_real_fastlane_run(serve, workdir, processes):
    base, _server = serve()
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
            "6000",
            "--run-id",
            "http-ppo",
            "--quiet",
            "--extras",
            json.dumps({"fastlane_video_mode": "grid", "num_envs": 2}),
        ],
        cwd=workdir,
        env=child_env(workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        listed = read_sse(base + "/api/runs/stream", "http-ppo", timeout=60)
        assert listed[-1][0] == "runs"
        assert http_json(base + "/api/stats")[1]["frames_encoded"] == 0  # nobody watches: nothing encoded
        # The MJPEG stream: JPEG parts until the run ends and its segment goes.
        with urllib.request.urlopen(authed(base + "/api/runs/http-ppo/frames.mjpg"), timeout=120) as response:
            assert response.headers["Content-Type"].startswith("multipart/x-mixed-replace")
            body = response.read()  # until the run ends and its segment goes
        jpegs = [
            part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
            for part in body.split(b"--mosaicframe\r\n")
            if part.startswith(b"Content-Type: image/jpeg")
        ]
        parts = len(jpegs)
        assert parts >= 2 and len(set(jpegs)) >= 2
        from PIL import Image

        width, height = Image.open(io.BytesIO(jpegs[-1])).size
        assert width > 2 * height  # two CartPole tiles side by side: grid mode
        events = read_sse(base + "/api/runs/http-ppo/stream", "run_completed")
        assert events[0][0] == "snapshot"
        snapshot = events[0][1]
        lifecycle = [e["event"] for e in snapshot["events"]] + [d["event"] for n, d in events if n == "event"]
        assert lifecycle[0] == "run_started" and lifecycle[-1] == "run_completed"
        curves = snapshot["curves"] or {}
        points = [d for n, d in events if n == "points"]
        assert curves.get("episodic_return") or points
    finally:
        run.wait(timeout=120)
    assert run.returncode == 0, run.stderr.read().decode()[-2000:]
    status, data = http_json(base + "/api/runs/http-ppo/frame.jpg")
    assert status == 404 and "no live frames for run http-ppo: run http-ppo has ended (completed)" in data["error"]
    status, data = http_json(base + "/api/runs/http-ppo/curves")
    assert status == 200 and len(data["curves"]["episodic_return"]) >= 1
    status, data = http_json(base + "/api/stats")
    assert data["frame_viewers"] == 0 and data["frames_encoded"] >= parts


def test_stopping_the_server_with_streams_open_is_clean(serve, workdir):
    """SIGINT while a run list, a run stream and an MJPEG stream are open: every response
    completes, exit code 130 (interrupted), nothing on stderr but the start line."""
    import threading

    import numpy as np

    from mosaic_fastlane.layout import Mode
    from mosaic_fastlane.segment import SegmentOwner, open_segment
    from mosaic_fastlane.writer import SlotWriter

    run_id = f"dash-stop-{os.getpid()}"
    run_dir = workdir / "var/trainer/runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_id, "extras": {"fastlane": True}}))
    owner = SegmentOwner(run_id, mode=Mode.SINGLE, slot_count=1, max_dim=32, interval_ms=20)
    writer = SlotWriter(open_segment(name=owner.name, writable=True), 0, 0)
    publishing = threading.Event()

    def publish() -> None:
        tick = 0
        while not publishing.is_set():
            writer.publish(np.full((16, 16, 3), tick % 255, np.uint8), tick=tick, global_step=tick)
            tick += 1
            time.sleep(0.02)

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    base, server = serve()
    try:
        streams = [
            urllib.request.urlopen(authed(base + path), timeout=30)
            for path in ("/api/runs/stream", f"/api/runs/{run_id}/stream", f"/api/runs/{run_id}/frames.mjpg")
        ]
        assert b"Content-Type: image/jpeg" in streams[2].read(200)
        assert server.stop() == 130  # SIGINT, as Ctrl-C: the shell convention
        for stream in streams:
            stream.read()  # each ends (no hang, no reset)
            stream.close()
    finally:
        publishing.set()
        publisher.join()
        writer.close()
        owner.remove()
    assert "ERROR" not in server.stderr and "Traceback" not in server.stderr, server.stderr


def test_bad_flags_are_one_line_and_exit_2(serve, workdir):
    from tests.conftest import run_cli

    _base, server = serve()
    for args, message in (
        (["--port", str(server.ready["port"])], f"--port {server.ready['port']}: cannot listen"),
        (["--port", "70000"], "--port must be 0..65535"),
        (["--target", "nowhere"], "--target must look like HOST:PORT"),
        (["--host", "no.such.host.invalid"], "--host no.such.host.invalid: cannot resolve it"),
    ):
        result = run_cli(["serve", *args], cwd=workdir, timeout=60)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_run_list_stays_small_beside_gigabyte_files(serve, workdir):
    """The dashboard lists through the same bounded reader as ``mosaic runs`` (a 1 GiB one-line
    events.jsonl, a 1 GiB line mid-log, a 1 GiB config; sparse): the list is right and the
    server's peak resident size (VmHWM, the kernel's figure) stays far below one such file, also
    after a look at that run's checkpoints, curves and stream."""
    from tests.core.test_listing_bounds import hostile_root

    root = workdir / "var/trainer/runs"
    root.mkdir(parents=True, mode=0o700)
    hostile_root(root)
    base, server = serve()
    status, runs = http_json(base + "/api/runs")
    by_id = {r["run_id"]: r for r in runs}
    assert status == 200 and set(by_id) == {"good", "one-line", "long-line", "big-config"}
    assert (by_id["long-line"]["global_step"], by_id["good"]["status"]) == (42, "completed")
    assert read_sse(base + "/api/runs/stream", "long-line")[0][0] == "runs"
    for run_id in ("one-line", "long-line"):
        assert http_json(base + f"/api/runs/{run_id}/files")[0] == 200
        assert http_json(base + f"/api/runs/{run_id}/curves")[0] == 200
    assert read_sse(base + "/api/runs/long-line/stream", "run_started")[0][0] == "snapshot"
    with open(f"/proc/{server.proc.pid}/status") as handle:
        peak = next(int(line.split()[1]) << 10 for line in handle if line.startswith("VmHWM:"))
    assert peak < 384 << 20, f"the server peaked at {peak >> 20} MiB"


def test_an_imported_run_is_listed_untrusted_until_the_owner_trusts_it(serve, workdir):
    """A run from ``mosaic runs import`` carries the untrusted mark in the dashboard's list too
    (``untrusted``: the page shows an "imported, untrusted" badge), and loses it with ``mosaic
    runs trust``."""
    from tests.conftest import run_cli
    from tests.core.test_listing_bounds import event

    elsewhere = workdir / "theirs"
    (elsewhere / "theirrun").mkdir(parents=True, mode=0o700)
    (elsewhere / "theirrun" / "events.jsonl").write_bytes(
        event("run_started", 1, {"algo": "ppo"}) + b"\n" + event("run_completed", 2, {}) + b"\n"
    )
    archive = workdir / "theirrun.tar.gz"
    root = workdir / "var/trainer/runs"
    for args in (
        ["runs", "export", "theirrun", "-o", str(archive), "--runs-dir", str(elsewhere)],
        ["runs", "import", str(archive), "--runs-dir", str(root)],
    ):
        assert run_cli(args, cwd=workdir).returncode == 0
    base, _server = serve()
    assert [(r["run_id"], r["untrusted"]) for r in http_json(base + "/api/runs")[1]] == [("theirrun", True)]
    assert run_cli(["runs", "trust", "theirrun", "--runs-dir", str(root)], cwd=workdir).returncode == 0
    deadline = time.monotonic() + 30  # the server keeps its list for half a second
    while (listed := [(r["run_id"], r["untrusted"]) for r in http_json(base + "/api/runs")[1]]) != [
        ("theirrun", False)
    ] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert listed == [("theirrun", False)]
