"""The dashboard's parts on their own: following events.jsonl, curves, the form, the access
guard (driven as a real ASGI app), and the frame feed over a real FastLane segment."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic_core.runstore.follow import READ_LIMIT, EventFollower, RunGone
from mosaic_core.types import FormOption, WorkerForm
from mosaic_dashboard.access import AccessGuard
from mosaic_dashboard.curves import Curves
from mosaic_dashboard.form import FormError, parse_submission
from mosaic_dashboard.frames import BOUNDARY, FrameFeed, mjpeg_part
from tests.conftest import REPO


def line(event: str, **payload) -> bytes:
    return (json.dumps({"event": event, "run_id": "r", "payload": payload}) + "\n").encode()


def test_the_follower_takes_complete_lines_only_and_survives_damage(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    follower = EventFollower(run)
    assert follower.poll() == []  # no events.jsonl yet: still starting
    path = run / "events.jsonl"
    path.write_bytes(line("run_started") + b'{"event": "metr')
    assert [e["event"] for e in follower.poll()] == ["run_started"]
    with open(path, "ab") as handle:
        handle.write(b'ics", "payload": {}}\nnot json\n[1]\n' + line("heartbeat"))
    assert [e["event"] for e in follower.poll()] == ["metrics", "heartbeat"]
    assert follower.skipped == 2
    path.write_bytes(line("run_started"))  # replaced by a shorter file: start again
    assert [e["event"] for e in follower.poll()] == ["run_started"]
    path.unlink()
    run.rmdir()
    with pytest.raises(RunGone, match="was deleted"):
        follower.poll()


def test_the_follower_drops_an_over_long_line_as_it_reads_it(tmp_path):
    """A 64 MiB line (sparse) between two events: read in 4 MiB polls, never held whole
    (tracemalloc's peak stays a few chunks), counted as skipped; the events around it arrive."""
    import tracemalloc

    run = tmp_path / "r"
    run.mkdir()
    with open(run / "events.jsonl", "wb") as handle:
        handle.write(line("run_started"))
        handle.seek(64 << 20, 1)
        handle.write(b"\n" + line("metrics", global_step=7))
    follower = EventFollower(run)
    tracemalloc.start()
    try:
        events = []
        while follower.offset < (run / "events.jsonl").stat().st_size:
            events += follower.poll()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e["event"] for e in events] == ["run_started", "metrics"] and follower.skipped == 1
    assert peak < 4 * READ_LIMIT, f"{peak >> 20} MiB held while following"


def test_curves_keep_one_point_per_step_and_stay_bounded():
    curves = Curves(max_points=50)
    for step in range(200):
        curves.add(
            {
                "global_step": step * 10,
                "episodic_return": float(step),
                "sps": None,
                "losses": {"value_loss": 1.0 / (step + 1)},
            }
        )
    curves.add({"global_step": 1990, "episodic_return": 7.0})  # same step: replaces the point
    series = curves.to_dict()
    assert set(series) == {"episodic_return", "losses/value_loss"}
    assert len(series["episodic_return"]) <= 50 and series["episodic_return"][0] == [0, 0.0]
    assert series["episodic_return"][-1] == [1990, 7.0]
    assert curves.add({"episodic_return": 1.0}) == {} and curves.add("junk") == {}


FIELDS = [
    {"name": "learning_rate", "kind": "float", "default": 0.00025},
    {"name": "num_envs", "kind": "int", "default": 4},
    {"name": "anneal_lr", "kind": "bool", "default": True},
    {"name": "layers", "kind": "list", "item_kind": "int", "default": [64, 64]},
    {"name": "mode", "kind": "literal", "choices": ["a", "b"], "default": "a"},
]
DESCRIBED = WorkerForm(
    algos=("ppo",), algo="ppo", options=tuple(FormOption(**f) for f in FIELDS), extras_key="algo_params"
)


@settings(max_examples=60, deadline=None)
@given(
    lr=st.floats(1e-6, 1.0),
    envs=st.integers(1, 64),
    anneal=st.booleans(),
    layers=st.lists(st.integers(1, 512), min_size=1, max_size=4),
    mode=st.sampled_from(["a", "b"]),
)
def test_form_values_reach_algo_params_typed_and_only_when_not_default(lr, envs, anneal, layers, mode):
    form = {
        "worker": "cleanrl",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "total_timesteps": "5000",
        "seed": "3",
        "args": {
            "learning_rate": repr(lr),
            "num_envs": str(envs),
            "anneal_lr": anneal,
            "layers": ", ".join(map(str, layers)),
            "mode": mode,
        },
    }
    config = parse_submission(form, DESCRIBED)
    assert (config["env_id"], config["total_timesteps"], config["seed"]) == ("CartPole-v1", 5000, 3)
    sent = {"learning_rate": lr, "num_envs": envs, "anneal_lr": anneal, "layers": layers, "mode": mode}
    expected = {k: v for k, v in sent.items() if v != next(f["default"] for f in FIELDS if f["name"] == k)}
    assert config["extras"].get("algo_params", {}) == expected


@pytest.mark.parametrize(
    "args, reason",
    [
        ({"num_envs": "2.5"}, "args.num_envs: '2.5' is not a whole number"),
        ({"learning_rate": "nan"}, "args.learning_rate: 'nan' is not a number"),
        ({"layers": "64, x"}, "args.layers: 'x' is not a whole number"),
        ({"mode": "c"}, "args.mode: 'c' is not one of a, b"),
        ({"num_envs": {"x": 1}}, "args.num_envs: expected a int"),
        ("flags", "args: must be an object"),
    ],
)
def test_a_malformed_form_names_its_field(args, reason):
    with pytest.raises(FormError, match=reason.replace(".", r"\.").replace("(", r"\(")):
        parse_submission(
            {"worker": "cleanrl", "env_id": "CartPole-v1", "total_timesteps": "10", "algo": "ppo", "args": args},
            DESCRIBED,
        )


def test_any_workers_options_build_the_form_and_the_dashboard_knows_no_worker():
    """The example worker's form, built in a fresh process: its policies, no CleanRL import."""
    code = (
        "import sys, json\n"
        "from mosaic_dashboard.form import form_schema, parse_submission, worker_form\n"
        "schema = form_schema({'name': 'example', 'metadata': {}}, None)\n"
        "config = parse_submission({'worker': 'example', 'algo': 'first', 'env_id': 'CartPole-v1',\n"
        "                           'total_timesteps': '50'}, worker_form('example', 'first'))\n"
        "print(json.dumps([schema, config, [m for m in sys.modules if m.startswith('cleanrl_worker')]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    schema, config, imported = json.loads(result.stdout)
    assert schema["algos"] == ["random", "first"] and schema["algo"] == "random" and schema["fields"] == []
    assert config == {
        "worker": "example",
        "algo": "first",
        "env_id": "CartPole-v1",
        "total_timesteps": 50,
        "extras": {},
    }
    # discovery reads descriptors only: the plugin module that returns them, not the worker's code
    assert set(imported) <= {
        "cleanrl_worker",
        "cleanrl_worker.metadata",
        "cleanrl_worker.plugin",
        "cleanrl_worker.hookspecs",
    }
    with pytest.raises(FormError, match="worker: required"):
        parse_submission({"env_id": "CartPole-v1", "total_timesteps": "10"}, None)


def test_the_live_frames_box_sets_the_key_the_frame_plugin_declares():
    """The form names no plugin's key: the box sets each key declared ``ExtrasKey(live_frames=True)``
    (FastLane's ``fastlane``), and nothing when it is off."""
    form = {"worker": "example", "env_id": "CartPole-v1", "total_timesteps": "10"}
    assert parse_submission({**form, "live_frames": "true"}, None)["extras"] == {"fastlane": True}
    assert parse_submission({**form, "live_frames": "false"}, None)["extras"] == {}


def call(guard: AccessGuard, path: str, *, method: str = "GET", headers: dict | None = None, query: str = ""):
    """Drive the guard as an ASGI app; returns (status, headers, body)."""
    sent: list[dict] = []

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"through"})

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "path": path,
        "method": method,
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    guard.app = inner
    asyncio.run(guard(scope, None, send))
    head = {k.decode(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], head, sent[1]["body"]


def test_the_access_guard():
    open_guard = AccessGuard(None, None, "127.0.0.1:1")
    assert call(open_guard, "/", headers={"Host": "127.0.0.1:1"})[0] == 200
    assert call(open_guard, "/", headers={"Host": "localhost:1"})[0] == 200
    assert call(open_guard, "/", headers={"Host": "[::1]:1"})[0] == 200
    status, head, body = call(open_guard, "/api/runs", headers={"Host": "evil.test"})
    assert status == 403 and head["content-type"] == "application/json" and b"not loopback" in body
    assert call(open_guard, "/api/daemon/submit", method="POST", headers={"Host": "127.0.0.1"})[0] == 403
    assert (
        call(open_guard, "/api/daemon/submit", method="POST", headers={"Host": "127.0.0.1", "X-Mosaic-Dashboard": "1"})[
            0
        ]
        == 200
    )

    guard = AccessGuard(None, "s3cret", "0.0.0.0:1")
    status, head, body = call(guard, "/")
    assert status == 401 and head["content-type"].startswith("text/plain") and b"needs its token" in body
    assert call(guard, "/", query="token=nope")[0] == 403
    assert call(guard, "/", headers={"Cookie": "mosaic_token=nope"})[0] == 403
    assert call(guard, "/", headers={"Cookie": "bad;;=="})[0] == 401
    status, head, _ = call(guard, "/", query="token=s3cret")
    assert status == 200 and head["set-cookie"].startswith("mosaic_token=s3cret;")
    assert call(guard, "/", headers={"Cookie": "other=1; mosaic_token=s3cret"})[0] == 200
    assert call(guard, "/", headers={"Authorization": "Bearer s3cret"})[0] == 200


def test_mjpeg_parts_are_closed_by_the_next_boundary():
    part = mjpeg_part(b"\xff\xd8jpeg\xff\xd9")
    assert part.startswith(b"Content-Type: image/jpeg\r\nContent-Length: 8\r\n\r\n\xff\xd8")
    assert part.endswith(f"\r\n--{BOUNDARY}\r\n".encode())


def test_the_frame_feed_encodes_only_while_watched_and_ends_with_the_segment(tmp_path):
    from mosaic_core import NoFrames
    from mosaic_fastlane.layout import Mode
    from mosaic_fastlane.segment import SegmentOwner, open_segment
    from mosaic_fastlane.writer import SlotWriter

    run_id = f"dash-feed-{os.getpid()}"
    owner = SegmentOwner(run_id, mode=Mode.SINGLE, slot_count=1, max_dim=32, interval_ms=10)
    writer = SlotWriter(open_segment(name=owner.name, writable=True), 0, 0)

    async def scenario():
        feed = FrameFeed(tmp_path / run_id)
        for step in range(5):  # published while nobody watches: nothing is encoded
            writer.publish(np.full((16, 24, 3), step * 40, np.uint8), tick=step, global_step=step)
        await asyncio.sleep(0.1)
        assert feed.encoded == 0
        got = []
        async for jpeg in feed.stream():
            got.append(jpeg)
            if len(got) == 1:
                writer.publish(np.full((16, 24, 3), 250, np.uint8), tick=9, global_step=9)
            else:
                owner.remove()  # the run ends: its segment goes, the stream ends
        assert len(got) == 2 and got[0] != got[1] and all(j.startswith(b"\xff\xd8") for j in got)
        assert feed.viewers == 0 and feed.ended and feed.encoded == 2

    try:
        asyncio.run(asyncio.wait_for(scenario(), 20))
        with pytest.raises(NoFrames, match=f"no run {run_id}"):  # FastLane's words: no segment, no run
            asyncio.run(FrameFeed(tmp_path / run_id).stream().__anext__())
    finally:
        writer.close()
        owner.remove()


def test_the_host_cli_stays_light():
    """`mosaic --help` lists `serve` without importing the web stack or the dashboard's server."""
    code = (
        "import sys; from mosaic_core.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('starlette', 'uvicorn', 'sse_starlette', 'mosaic_dashboard.app', 'PIL', 'grpc')"
        " if m in sys.modules]\nprint('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60).stdout
    assert "serve" in out and "HEAVY []" in out, out[-800:]
