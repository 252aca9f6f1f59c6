"""Issue 47, class 5: text from a run is data, and non-finite numbers are ``null`` in every JSON
we emit (:mod:`mosaic_core.jsontext`).

Another local user (uid 65534) packs a run whose events, manifest and evaluation hold ``NaN`` and
``Infinity`` (Python's ``json`` reads them; no other parser does); the owner imports it beside a
run of their own. ``/api/runs`` answered 500 for the whole list and ``mosaic runs --json``
printed ``NaN``: now every answer is strict JSON (parsed here with a parser that refuses those
tokens) and lists both runs."""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard.conftest import TOKENS, authed, http, start
from tests.security.round4 import EXAMPLE, imported_run, mosaic
from tests.trainer.second_user import needs_second_user

RUN = "nanrun"
EVENTS = "\n".join(
    [
        '{"event": "run_started", "run_id": "nanrun", "seq": 1, "timestamp": NaN, "payload": {"worker": "example"}}',
        '{"event": "metrics", "run_id": "nanrun", "seq": 2, "timestamp": 2.0, "payload": {"global_step": 100, '
        '"episodic_return": NaN, "episodic_return_smoothed": Infinity, "losses": {"value_loss": -Infinity}}}',
        '{"event": "heartbeat", "run_id": "nanrun", "seq": 3, "timestamp": 3.0, "payload": {"pid": 1, '
        '"metrics": {"global_step": 100, "episodic_return": NaN}}}',
        '{"event": "run_completed", "run_id": "nanrun", "seq": 4, "timestamp": Infinity, "payload": {"sps": NaN}}',
    ]
)


def strict(text: str):
    """JSON as any other parser reads it: NaN and Infinity are errors."""

    def refuse(token: str):
        raise AssertionError(f"{token} in JSON we emitted: {text[:300]}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("nan")
    root = workdir / "runs"
    own = mosaic(
        workdir,
        "run",
        *("--worker", EXAMPLE["worker"], "--algo", EXAMPLE["algo"], "--env-id", EXAMPLE["env_id"]),
        *("--total-timesteps", "300", "--run-id", "mine", "--runs-dir", str(root), "--quiet"),
    )
    assert own.returncode == 0, own.stderr[-2000:]
    shared = Path(tempfile.mkdtemp(prefix="mosaic-r4nan-"))
    shared.chmod(0o1777)
    config = {"run_id": RUN, **EXAMPLE, "total_timesteps": 300, "seed": 1, "extras": {"lr": float("nan")}}
    files = {
        "config.json": json.dumps(config),
        "events.jsonl": EVENTS + "\n",
        "manifest.json": '{"schema": "mosaic.manifest/1", "status": "completed", "sps": NaN, "loss": -Infinity}',
        "evaluations/step_300/eval.json": '{"schema": "mosaic.eval/1", "mean": NaN, "global_step": 300, "episodes": []}',
    }
    imported_run(shared, root, workdir, RUN, files)
    shutil.rmtree(shared, ignore_errors=True)
    return workdir, root


@needs_second_user
def test_the_cli_prints_strict_json_for_an_imported_run_with_nan(root):
    workdir, root = root
    listed = mosaic(workdir, "runs", "--json", "--runs-dir", str(root))
    assert listed.returncode == 0, listed.stderr
    runs = {r["run_id"]: r for r in strict(listed.stdout)}
    assert set(runs) == {"mine", RUN} and runs["mine"]["status"] == "completed"
    assert runs[RUN]["untrusted"] is True and runs[RUN]["last_return"] is None
    shown = mosaic(workdir, "runs", "show", RUN, "--json", "--runs-dir", str(root))
    assert shown.returncode == 0, shown.stderr
    assert strict(shown.stdout)["config"]["extras"]["lr"] is None
    logged = mosaic(workdir, "logs", RUN, "--json", "--runs-dir", str(root))
    assert logged.returncode == 0, logged.stderr
    events = [strict(line) for line in logged.stdout.splitlines() if line.strip()]
    assert [e["event"] for e in events] == ["run_started", "metrics", "heartbeat", "run_completed"]
    assert events[1]["payload"]["episodic_return"] is None


@needs_second_user
def test_one_run_with_nan_never_empties_the_dashboard(root):
    workdir, root = root
    server = start(["serve", "--port", "0", "--runs-dir", str(root)], workdir, "serve")
    try:
        base = f"http://127.0.0.1:{server.ready['port']}"
        TOKENS[base] = server.ready["url"].split("?token=", 1)[1]
        for path in ("/api/runs", f"/api/runs/{RUN}/curves", f"/api/runs/{RUN}/files", f"/api/groups?runs=mine,{RUN}"):
            status, _headers, body = http(base + path)
            assert status == 200, (path, body[:500])
            strict(body.decode())
        status, _headers, body = http(base + "/api/runs")
        assert {r["run_id"] for r in strict(body.decode())} == {"mine", RUN}
        for path in ("/api/runs/stream", f"/api/runs/{RUN}/stream"):  # the first event of each stream
            with urllib.request.urlopen(authed(base + path), timeout=30) as stream:
                line = b""
                while not line.startswith(b"data:"):
                    line = stream.readline()
                strict(line[5:].decode())
    finally:
        server.stop()
    assert "Traceback" not in server.stderr, server.stderr[-3000:]
