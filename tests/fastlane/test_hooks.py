"""Each FastLane hook through a real PluginHost (the end-to-end tests run them in real runs)."""

import time
import types

import gymnasium as gym
import pytest
from fastlane_helpers import child_context, manifest, plugin_host, run_context, shm_leftovers

from mosaic_core import _patchpoints
from mosaic_core.child import FrameInfo
from mosaic_core.cli.commands import CliCommand
from mosaic_core.hookspecs import hookimpl
from mosaic_fastlane import layout, settings
from mosaic_fastlane.reader import FastLaneReader
from mosaic_fastlane.recorder import SUBDIR
from mosaic_fastlane.wrapper import FastLaneWrapper


class NoRender(gym.Env):
    metadata = {"render_modes": []}
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return 0, {}

    def step(self, action):
        return 0, 1.0, False, False, {}


gym.register("FastLaneNoRender-v0", entry_point=NoRender)


@pytest.fixture
def started(tmp_path, monkeypatch, request):
    """A started run (segment created by the host hooks) and the child's environment set."""

    def start(extras, run_id=None, num_envs=None):
        run_id = run_id or f"hooks-{request.node.name[:60]}".replace("[", "-").replace("]", "")
        host = plugin_host()
        run = run_context(tmp_path, run_id, extras)
        host.run_started(run)
        for name, value in host.child_env(run).items():
            monkeypatch.setenv(name, value)
        runs.append((host, run))
        return host, run, child_context(run, num_envs)

    runs = []
    yield start
    for host, run in runs:
        host.run_finished(run, "completed")
        assert host.failure_records() == []
        assert shm_leftovers(run.run_id) == []


def test_mosaic_validate_config_reports_problems_naming_the_key(tmp_path):
    host = plugin_host()
    good = run_context(tmp_path, "v1", {"fastlane_video_mode": "grid"})
    bad = run_context(tmp_path, "v2", {"fastlane_video_mode": "movie", "fastlane_grid_limit": 0})
    assert host.validate_config(good.config) == []
    assert host.validate_config(bad.config) == [
        "extras.fastlane_video_mode: 'movie' is not one of single, grid, off",
        "extras.fastlane_grid_limit: must be an integer >= 1, got 0",
    ]


def test_mosaic_run_started_and_mosaic_child_env_create_one_segment(started):
    host, run, _child = started({"fastlane": True})
    segment = layout.segment_name(run.run_id)
    assert shm_leftovers(run.run_id) == [segment]
    env = host.child_env(run)  # a second call reuses the segment
    resolved = settings.Settings.from_env(env)
    assert (resolved.segment, resolved.mode, resolved.slots) == (segment, "single", 1)
    with FastLaneReader(run.run_id) as reader:
        assert reader.header.run_id == run.run_id and reader.header.owner_alive


def test_mosaic_child_env_alone_creates_nothing_as_in_a_dry_run(tmp_path):
    host = plugin_host()
    run = run_context(tmp_path, "dry1", {"fastlane_video_mode": "grid", "num_envs": 3})
    resolved = settings.Settings.from_env(host.child_env(run))
    assert (resolved.mode, resolved.slots, resolved.num_envs) == ("grid", 3, 3)
    assert shm_leftovers("dry1") == []


def test_runs_without_fastlane_get_nothing(tmp_path):
    host = plugin_host()
    run = run_context(tmp_path, "off1", {"fastlane_video_mode": "off"})
    host.run_started(run)
    assert host.child_env(run) == {} and host.build_manifest(run, "completed") == {}
    assert host.heartbeat_fields(run) == {} and shm_leftovers("off1") == []


def test_mosaic_env_make_kwargs_only_for_publishing_envs_and_never_over_the_script(started):
    host, run, child = started({"fastlane_slot": 1})
    assert host.env_make_kwargs(child, "CartPole-v1", 1, {}) == {"render_mode": "rgb_array"}
    assert host.env_make_kwargs(child, "CartPole-v1", 0, {}) == {}
    assert host.env_make_kwargs(child, "CartPole-v1", None, {}) == {}
    assert host.env_make_kwargs(child, "CartPole-v1", 1, {"render_mode": "human"}) == {}
    assert host.env_make_kwargs(child, "CartPole-v1", 1, {"render_mode": None}) == {"render_mode": "rgb_array"}
    assert host.env_make_kwargs(child, "FastLaneNoRender-v0", 1, {}) == {}


def test_mosaic_wrap_env_wraps_once_and_skips_envs_that_cannot_render(started, capsys):
    host, run, child = started({"fastlane": True})
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    wrapped = host.wrap_env(child, env, "CartPole-v1", 0)
    assert isinstance(wrapped, FastLaneWrapper)
    assert host.wrap_env(child, wrapped, "CartPole-v1", 0) is wrapped  # never twice
    assert host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 1) is not None
    plain = gym.make("CartPole-v1")
    assert host.wrap_env(child, plain, "CartPole-v1", 0) is plain
    wrapped.close()
    plain = gym.make("CartPole-v1")
    assert host.wrap_env(child, plain, "CartPole-v1", 0) is plain
    assert capsys.readouterr().err.count("render_mode=None") == 1  # one warning, not one per env


def test_mosaic_on_frame_feeds_every_consumer(started, monkeypatch):
    seen = []
    third_party = types.ModuleType("third_party_frames")
    third_party.mosaic_on_frame = hookimpl(lambda frame, info: seen.append((frame.shape, info.global_step)))
    host = plugin_host(third_party)
    _, run, child = started({"fastlane": True, "fastlane_record": 2})
    monkeypatch.setitem(_patchpoints._state, "host", host)  # what install() sets in a training process
    env = host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 0)
    env.reset(seed=0)
    with FastLaneReader(run.run_id) as reader:
        for _ in range(4):
            env.fastlane._next_due = 0  # a frame is due at every step
            env.step(env.action_space.sample())
        frame = reader.latest()
    env.close()
    assert seen == [((341, 512, 3), step) for step in (1, 2, 3, 4)]  # 400x600 downscaled to 512
    assert frame.frame_number == 4 and frame.pixels.shape == (341, 512, 3) and frame.global_step == 4
    assert sorted(p.name for p in (run.run_dir / SUBDIR).iterdir()) == [
        "env0-step000000002.png",
        "env0-step000000004.png",
    ]


def test_frames_are_throttled_before_rendering(started, monkeypatch):
    host, run, child = started({"fastlane": True})
    monkeypatch.setitem(_patchpoints._state, "host", host)
    env = host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 0)
    renders = []
    render = env.fastlane._render
    env.fastlane._render = lambda: renders.append(1) or render()
    env.reset(seed=0)
    env.fastlane._next_due = float("inf")  # nothing due: no render at all
    for _ in range(20):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    assert renders == [] and env.fastlane.steps == 20
    env.close()


def test_slow_frames_stretch_the_interval_to_the_render_budget(started, monkeypatch):
    host, run, child = started({"fastlane": True})
    monkeypatch.setitem(_patchpoints._state, "host", host)
    env = host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 0)
    render = env.fastlane._render
    env.fastlane._render = lambda: time.sleep(0.02) or render()  # a frame costs >= 20 ms
    env.reset(seed=0)
    env.step(0)  # the first frame pays one-time set-up and is not counted
    env.fastlane._next_due = 0
    before = time.monotonic()
    env.step(0)
    gap = env.fastlane._next_due - before
    assert gap >= 0.02 / settings.DEFAULT_RENDER_BUDGET  # not the 0.1 s interval: rendering stays <= 5 %
    env.close()


def test_mosaic_on_heartbeat_mosaic_build_manifest_and_mosaic_run_finished(started, monkeypatch):
    host, run, child = started({"fastlane": True})
    monkeypatch.setitem(_patchpoints._state, "host", host)
    env = host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 0)
    env.reset(seed=0)
    env.step(0)
    beat = host.heartbeat_fields(run)["fastlane"]
    assert beat["frames_published"] == 1 and beat["global_step"] == 1 and beat["enabled"]
    host.on_child_message(run, "fastlane", {"error": "env 3 could not attach"})
    host.on_child_message(run, "other", {"error": "not ours"})
    section = manifest(run, host)["fastlane"]
    assert section["segment"] == layout.segment_name(run.run_id) and section["mode"] == "single"
    assert section["frames_published"] == 1 and section["errors"] == ["env 3 could not attach"]
    assert section["slots"][0]["writer_pid"] > 0 and section["max_dim"] == 512
    env.close()
    host.run_finished(run, "completed")
    assert shm_leftovers(run.run_id) == []
    host.run_finished(run, "completed")  # idempotent
    assert host.failure_records() == []


def test_mosaic_cli_commands_contributes_fastlane():
    commands = plugin_host().cli_commands()
    assert [c.name for c in commands] == ["fastlane"] and isinstance(commands[0], CliCommand)


def test_frame_info_metrics_are_plausible(started, monkeypatch):
    host, run, child = started({"fastlane": True, "num_envs": 4}, num_envs=4)
    monkeypatch.setitem(_patchpoints._state, "host", host)
    env = host.wrap_env(child, gym.make("CartPole-v1", render_mode="rgb_array"), "CartPole-v1", 0)
    env.reset(seed=0)
    episodes = 0
    for _ in range(300):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            episodes += 1
            env.reset()
    env.fastlane._next_due = 0
    env.step(env.action_space.sample())
    with FastLaneReader(run.run_id) as reader:
        frame = reader.latest()
    env.close()
    assert frame.global_step == 301 * 4 and frame.episode_count >= episodes >= 1
    assert frame.last_reward == 1.0 and 5 < frame.rolling_return < 100 and frame.step_rate_hz > 0
    assert isinstance(FrameInfo(1, 0, 0.0, None, 0.0, 0), FrameInfo)


def test_loading_the_plugin_and_its_command_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, mosaic_fastlane, mosaic_fastlane.plugin as p; p.mosaic_cli_commands(); "
        "print([m for m in ('numpy', 'gymnasium', 'torch', 'wandb', 'matplotlib', 'tensorboard') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
