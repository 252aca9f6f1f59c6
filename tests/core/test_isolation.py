"""One broken plugin costs only its own contribution: a real run next to a plugin that fails to
load and one that fails in child_setup, on_heartbeat, build_manifest and on_scalar."""

from __future__ import annotations

import json

from tests.core.distributions import make_distribution

BROKEN_AT_RUN_TIME = """
from mosaic_core.hookspecs import hookimpl

@hookimpl
def mosaic_child_setup(child):
    raise RuntimeError("setup exploded")

@hookimpl
def mosaic_on_heartbeat(run):
    raise KeyError("beat")

@hookimpl
def mosaic_build_manifest(run, status):
    raise ValueError("no manifest today")

@hookimpl
def mosaic_on_scalar(child, tag, value, step):
    raise ZeroDivisionError("scalar")
"""


def _site(tmp_path):
    return make_distribution(
        tmp_path / "site",
        "mosaic-broken",
        {"mosaic.plugins": {"broken_load": "broken_load_plugin", "broken_hooks": "broken_hooks_plugin"}},
        {
            "broken_load_plugin": "raise ImportError('cannot import this plugin')\n",
            "broken_hooks_plugin": BROKEN_AT_RUN_TIME,
        },
    )


def test_a_failing_plugin_costs_only_its_own_contribution(mosaic, runs_root, tmp_path):
    env = {"PYTHONPATH": str(_site(tmp_path))}
    extras = {"fastlane": True, "metrics_interval_s": 0.1}
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "4096",
        "--run-id",
        "iso",
        "--heartbeat-interval",
        "0.5",
        "--extras",
        json.dumps(extras),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    events = result.events
    assert events[-1]["event"] == "run_completed"
    err = result.stderr
    assert err.count("plugin 'broken_load' (mosaic-broken 1.0) failed to load") == 1
    assert err.count("plugin 'broken_hooks' failed in mosaic_on_heartbeat (host): KeyError") == 1
    assert err.count("plugin 'broken_hooks' failed in mosaic_build_manifest (host)") == 1
    # Every other plugin's part is there: FastLane in heartbeats, the metric bridge's events.
    beats = [e["payload"] for e in events if e["event"] == "heartbeat"]
    assert beats and all("fastlane" in b for b in beats)
    assert any(e["event"] == "metrics" and "episodic_return" in e["payload"] for e in events)
    manifest = json.loads((runs_root / "iso" / "manifest.json").read_text())
    assert manifest["fastlane"]["frames_published"] > 0  # patches were installed before the failing setup
    assert manifest["tensorboard"] and manifest["metrics"]
    report = manifest["plugins"]
    assert [p["name"] for p in report["failed_to_load"]] == ["broken_load"]
    assert "cannot import this plugin" in report["failed_to_load"][0]["error"]
    failures = {(f["hook"], f["where"]) for f in report["hook_failures"] if f["plugin"] == "broken_hooks"}
    assert failures == {
        ("mosaic_child_setup", "training process"),
        ("mosaic_on_scalar", "training process"),
        ("mosaic_on_heartbeat", "host"),
        ("mosaic_build_manifest", "host"),
    }
    beats_failed = next(f for f in report["hook_failures"] if f["hook"] == "mosaic_on_heartbeat")
    assert beats_failed["count"] == len(beats)  # named once on stderr, counted every time


def test_strict_mode_still_refuses_a_plugin_that_failed_to_load(mosaic, tmp_path):
    env = {"PYTHONPATH": str(_site(tmp_path)), "MOSAIC_STRICT_PLUGINS": "1"}
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "64",
        "--dry-run",
        env=env,
    )
    assert result.returncode == 2 and "broken_load" in result.stderr and "Traceback" not in result.stderr


def test_a_config_hook_failure_stops_the_run_naming_plugin_and_hook(mosaic, tmp_path):
    site = make_distribution(
        tmp_path / "site2",
        "mosaic-badconfig",
        {"mosaic.plugins": {"badconfig": "badconfig_p"}},
        {
            "badconfig_p": "from mosaic_core.hookspecs import hookimpl\n\n@hookimpl\n"
            "def mosaic_validate_config(config):\n    raise OSError('disk gone')\n"
        },
    )
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "64",
        env={"PYTHONPATH": str(site)},
    )
    assert result.returncode == 2 and not result.stdout
    assert "plugin 'badconfig' failed in mosaic_validate_config: OSError: disk gone" in result.stderr
