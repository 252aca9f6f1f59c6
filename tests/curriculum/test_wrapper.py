"""The training-process side, in this process: the wrapper, its reports, the hooks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address
from mosaic_core.child import ChildContext
from mosaic_curriculum import plugin
from mosaic_curriculum.schedule import load_schedule
from mosaic_curriculum.stagefile import StageFile, stage_path
from mosaic_curriculum.wrapper import MAX_PENDING_RETURNS, REPORT_EVERY, SEED_STRIDE, CurriculumEnv, passed_kwargs

GYMNASIUM_1 = int(gym.__version__.split(".")[0]) >= 1
pytestmark = pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")
CARTPOLES = [
    {"env_id": "CartPole-v1", "steps": 100},
    {"env_id": "CartPole-v0", "steps": 100},
    {"env_id": "CartPole-v1"},
]


class Host:
    """The real pieces a host holds for a run: the stage file and a side-channel receiver."""

    def __init__(self, run_dir):
        self.stage_file = StageFile.create(stage_path(run_dir))
        self.messages = []
        self.closed = False
        self.receiver = ChannelReceiver(new_address("test"), lambda kind, p: self.messages.append((kind, p))).start()

    def child(self, run_dir, schedule):
        return ChildContext(
            run_id="test",
            run_dir=run_dir,
            extras={"curriculum_schedule": schedule},
            channel=ChannelSender(self.receiver.address),
        )

    def close(self):
        if not self.closed:  # ChannelReceiver.close may run only once
            self.closed = True
            self.receiver.close()  # delivers what is still queued

    def reports(self):
        self.close()
        return [p for kind, p in self.messages if kind == "curriculum"]


@pytest.fixture
def host(tmp_path):
    h = Host(tmp_path)
    yield h
    h.close()
    h.stage_file.remove()


def make(child, env_id, **kwargs):
    """What MOSAIC's patched gym.make does for this plugin."""
    env = gym.make(env_id, **kwargs)
    wrap = plugin.mosaic_wrap_env(child, env, env_id)
    return wrap(env) if wrap else env


def test_only_the_first_stage_env_is_wrapped(host, tmp_path):
    child = host.child(tmp_path, CARTPOLES)
    assert isinstance(make(child, "CartPole-v1"), CurriculumEnv)
    assert not isinstance(make(child, "Acrobot-v1"), CurriculumEnv)
    plain = ChildContext(run_id="x", run_dir=tmp_path / "other", extras={}, channel=ChannelSender(None))
    assert plugin.mosaic_wrap_env(plain, gym.make("CartPole-v1"), "CartPole-v1") is None


def test_the_inner_env_switches_at_reset_and_spaces_stay(host, tmp_path):
    env = make(host.child(tmp_path, CARTPOLES), "CartPole-v1")
    spaces = (env.observation_space, env.action_space)
    env.reset(seed=3)
    assert env.unwrapped.spec.id == "CartPole-v1" and env.stage == 0
    host.stage_file.write(1)
    env.step(0)  # mid-episode: nothing changes
    assert env.unwrapped.spec.id == "CartPole-v1"
    obs, _ = env.reset()
    assert env.unwrapped.spec.id == "CartPole-v0" and env.stage == 1
    assert env.curriculum_env_id == "CartPole-v0" and env.spec.id == "CartPole-v0"
    assert (env.observation_space, env.action_space) == spaces
    # The new stage env is seeded from the script's seed, so runs repeat.
    expected, _ = gym.make("CartPole-v0").reset(seed=3 + SEED_STRIDE)
    np.testing.assert_array_equal(obs, expected)
    host.stage_file.write(9)  # past the end: the last stage
    env.reset()
    assert env.stage == 2
    env.close()


def test_reports_count_every_step_and_episode_once_with_their_stage(host, tmp_path):
    child = host.child(tmp_path, CARTPOLES)
    envs = gym.vector.SyncVectorEnv([lambda: make(child, "CartPole-v1") for _ in range(3)])
    envs.reset(seed=1)
    envs.action_space.seed(1)
    env_steps = seen_episodes = 0
    resetting = np.zeros(3, dtype=bool)
    for i in range(300):
        if i == 150:
            host.stage_file.write(1)
            steps_before_switch = env_steps
        _, _, terms, truncs, _ = envs.step(envs.action_space.sample())
        # gymnasium 1.x spends the vector step after an episode's end on that env's reset
        env_steps += int((~resetting).sum()) if GYMNASIUM_1 else 3
        done = terms | truncs
        resetting = done if GYMNASIUM_1 else resetting
        seen_episodes += int(done.sum())
    envs.close()
    reports = host.reports()
    assert sum(r["steps"] for r in reports) == env_steps
    assert sum(r["episodes"] for r in reports) == seen_episodes
    assert sum(len(r["returns"]) for r in reports) == seen_episodes
    assert {r["stage"] for r in reports} == {0, 1}
    first_of_stage_1 = next(i for i, r in enumerate(reports) if r["stage"] == 1)
    assert sum(r["steps"] for r in reports[:first_of_stage_1]) >= steps_before_switch


def test_a_long_episode_on_the_old_stage_is_truncated_at_the_next_check(host, tmp_path):
    pytest.importorskip("minigrid")
    schedule = [{"env_id": "MiniGrid-Empty-8x8-v0", "steps": 10}, {"env_id": "MiniGrid-Empty-5x5-v0"}]
    env = make(host.child(tmp_path, schedule), "MiniGrid-Empty-8x8-v0")
    env.reset(seed=0)
    host.stage_file.write(1)
    for step in range(1, 200):  # turning left forever: the episode would last 256 steps  # noqa: B007 (step is read after the loop)
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            break
    assert (step, terminated, truncated) == (REPORT_EVERY, False, True)
    env.reset()
    assert env.unwrapped.spec.id == "MiniGrid-Empty-5x5-v0"
    env.close()


def test_make_kwargs_follow_the_run_but_registered_defaults_do_not(host, tmp_path):
    pytest.importorskip("minigrid")
    schedule = [{"env_id": "MiniGrid-DoorKey-5x5-v0", "steps": 10}, {"env_id": "MiniGrid-DoorKey-6x6-v0"}]
    env = make(host.child(tmp_path, schedule), "MiniGrid-DoorKey-5x5-v0", render_mode="rgb_array", max_steps=77)
    assert passed_kwargs(env, "MiniGrid-DoorKey-5x5-v0") == {"render_mode": "rgb_array", "max_steps": 77}
    host.stage_file.write(1)
    env.reset(seed=0)
    inner = env.unwrapped
    assert (inner.width, inner.max_steps, inner.render_mode) == (6, 77, "rgb_array")
    assert env.render().ndim == 3
    env.close()


def test_counts_wait_while_the_host_cannot_be_reached(tmp_path):
    StageFile.create(stage_path(tmp_path)).close()
    sent = []
    env = CurriculumEnv(
        gym.make("CartPole-v1"),
        load_schedule(CARTPOLES),
        lambda: 0,
        lambda payload, reliable: bool(sent.append(payload)) and False,
    )
    env.reset(seed=0)
    steps = episodes = 0
    while episodes < MAX_PENDING_RETURNS + 5:
        _, _, terminated, truncated, _ = env.step(0)
        steps += 1
        if terminated or truncated:
            episodes += 1
            env.reset()
    attempts = len(sent)
    assert attempts <= steps // REPORT_EVERY  # one try per check, not one per step
    env.close()  # a last try
    last = sent[-1]
    assert last["episodes"] == episodes  # nothing lost...
    assert len(last["returns"]) == MAX_PENDING_RETURNS  # ...but only the latest returns are kept
    assert last["steps"] == steps


def test_a_reset_without_a_step_retries_the_counts_the_host_did_not_get(tmp_path):
    """A program waiting for the next stage resets its envs without stepping: the counts a full
    channel dropped go out then, or the host's decision could wait for them forever."""
    StageFile.create(stage_path(tmp_path)).close()
    delivered, host_up = [], [False]
    env = CurriculumEnv(
        gym.make("CartPole-v1"),
        load_schedule(CARTPOLES),
        lambda: 0,
        lambda payload, reliable: host_up[0] and not delivered.append(payload),
    )
    env.reset(seed=0)
    for step in range(1, REPORT_EVERY + 1):  # the report at the last step is dropped
        _, _, terminated, truncated, _ = env.step(0)
        if (terminated or truncated) and step < REPORT_EVERY:
            env.reset()  # after a step: no retry
    host_up[0] = True
    env.reset()
    assert delivered == []  # a reset after steps waits for the next report, as before
    env.reset()  # no step since the last reset: the program waits
    [report] = delivered
    assert report["steps"] == REPORT_EVERY and report["episodes"] >= 1 and report["stage"] == 0


def test_the_stage_curve_is_written_at_the_scripts_steps(host, tmp_path):
    pytest.importorskip("tensorboardX")
    import tensorboardX  # noqa: F401  (the script's writer library)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    child = host.child(tmp_path, CARTPOLES)
    plugin.mosaic_on_scalar(child, "charts/episodic_return", None, None)  # no step: nothing to align with
    plugin.mosaic_on_scalar(child, "charts/episodic_return", 5, None)
    plugin.mosaic_on_scalar(child, "charts/SPS", 7, None)
    host.stage_file.write(2)
    plugin.mosaic_on_scalar(child, "charts/SPS", 9, None)
    plugin.mosaic_on_scalar(child, "curriculum/stage", 11, None)  # its own writes are ignored
    plugin.mosaic_on_scalar(child, "charts/SPS", 12, None)
    plugin.child_state(child).scalars.close()
    events = EventAccumulator(str(tmp_path / "runs" / "curriculum"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("curriculum/stage")] == [(5, 0.0), (9, 2.0)]


def test_the_stage_curve_goes_beside_the_scripts_writer(host, tmp_path):
    """The writer's folder decides (analytics' ``tensorboard_dir`` moved it to ``tb/<run>``); a
    writer outside the run directory does not take the curve with it."""
    pytest.importorskip("tensorboardX")
    import tensorboardX  # noqa: F401

    child = host.child(tmp_path, CARTPOLES)
    plugin.mosaic_on_scalar(child, "charts/SPS", 3, str(tmp_path / "tb" / "run1"))
    plugin.child_state(child).scalars.close()
    assert list((tmp_path / "tb" / "curriculum").iterdir()) and not (tmp_path / "runs").exists()
    outside = host.child(tmp_path / "other", CARTPOLES)
    plugin.mosaic_on_scalar(outside, "charts/SPS", 3, str(tmp_path / "tb" / "run1"))
    plugin.child_state(outside).scalars.close()
    assert list((tmp_path / "other" / "runs" / "curriculum").iterdir())
