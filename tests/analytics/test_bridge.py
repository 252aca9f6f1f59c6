"""The metric bridge: batching in the training process, bounded state on the host, rate-limited
`metrics` events, all through the real side channel and the plugin's own hooks."""

import io
import json
import math
import threading

from mosaic_analytics import plugin
from mosaic_analytics.board import MetricBoard, classify
from mosaic_analytics.bridge import MAX_OTHER_TAGS, MAX_TAGS, MESSAGE_KIND, RETURN_WINDOW, ScalarBuffer
from mosaic_core.channel import ChannelReceiver, ChannelSender, new_address
from mosaic_core.config import build_config
from mosaic_core.events import EventEmitter
from mosaic_core.runs import RunContext, RunDirectory


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Channel:
    """A real side channel: a receiver thread collecting what a sender sends."""

    def __init__(self):
        self.messages, self._got = [], threading.Event()
        self.receiver = ChannelReceiver(new_address("bridge-test"), self._on).start()
        self.sender = ChannelSender(self.receiver.address)

    def _on(self, kind, payload):
        self.messages.append((kind, payload))
        self._got.set()

    def close(self):
        self.receiver.close()
        return self.messages


def test_the_first_episodic_return_goes_out_at_once_then_scalars_wait_for_the_interval():
    """A run's first metric is its first episode's return: not held for the send interval (the
    first `metrics` event comes as soon as the library's own script prints it)."""
    channel, clock = Channel(), Clock()
    buffer = ScalarBuffer(channel.sender.send, interval=0.25, clock=clock)
    buffer.add("charts/learning_rate", 2.5e-4, 0)
    buffer.add("charts/SPS", 900.0, 0)
    assert buffer.sent == 0  # step-0 scalars wait: the first metric is a return
    buffer.add("charts/episodic_return", 12.0, 96)
    buffer.add("charts/episodic_length", 12.0, 96)
    buffer.add("charts/episodic_return", 30.0, 128)
    assert buffer.sent == 1  # the second return waits for the interval like any scalar
    ((kind, payload),) = channel.close()
    assert kind == MESSAGE_KIND and payload["global_step"] == 96
    assert payload["scalars"]["charts/episodic_return"] == [12.0, 96, 1, 12.0, [12.0]]
    assert set(payload["scalars"]) == {"charts/learning_rate", "charts/SPS", "charts/episodic_return"}


def test_scalars_are_batched_and_sent_only_when_due():
    channel, clock = Channel(), Clock()
    buffer = ScalarBuffer(channel.sender.send, interval=0.25, clock=clock)
    buffer._return_seen = True  # past the first return (above): every scalar waits for the interval
    for step in range(1000):
        buffer.add("charts/episodic_return", float(step), step)
        buffer.add("losses/value_loss", 0.5, step)
    assert buffer.sent == 0  # nothing was due: not one send for 2000 scalars
    clock.now = 0.3
    buffer.add("charts/SPS", 1234.0, 1000)
    clock.now = 0.4
    buffer.add("charts/SPS", 1250.0, 1001)  # not due again yet
    assert buffer.flush(reliable=True) and not buffer.flush()  # nothing changed since: nothing sent
    messages = channel.close()
    assert [kind for kind, _ in messages] == [MESSAGE_KIND, MESSAGE_KIND]
    first, second = messages[0][1], messages[1][1]
    assert first["global_step"] == 1000
    # a return carries its last RETURN_WINDOW values too: the host averages exactly the last episodes
    assert first["scalars"]["charts/episodic_return"] == [999.0, 999, 1000, sum(range(1000)), list(range(900, 1000))]
    assert first["scalars"]["charts/SPS"] == [1234.0, 1000, 1, 1234.0]
    assert set(second["scalars"]) == {"charts/SPS"} and second["scalars"]["charts/SPS"][0] == 1250.0


def test_a_burst_goes_out_when_the_program_says_it_ended(monkeypatch):
    """`mosaic_scalars_reported` (mosaic_core.child.scalars_reported, after an RLlib iteration's
    values): the held burst is sent at once, not with the next burst (tests/rllib: the first
    `metrics` event is the first iteration's)."""
    from mosaic_analytics import bridge

    channel, clock = Channel(), Clock()
    buffer = ScalarBuffer(channel.sender.send, interval=0.25, clock=clock)
    monkeypatch.setattr(bridge, "_buffer", buffer)
    for tag in ("charts/episodic_length", "losses/policy_loss", "charts/learning_rate"):
        buffer.add(tag, 1.0, 500)
    assert buffer.sent == 0  # not due: held
    plugin.mosaic_scalars_reported(child=None)
    plugin.mosaic_scalars_reported(child=None)  # nothing new: nothing sent
    ((kind, payload),) = channel.close()
    assert kind == MESSAGE_KIND and payload["global_step"] == 500 and len(payload["scalars"]) == 3


def test_a_failed_send_keeps_the_counts_for_the_next_batch():
    clock = Clock()
    nowhere = ChannelSender(new_address("nobody-listens"))
    buffer = ScalarBuffer(nowhere.send, clock=clock)
    buffer.add("charts/episodic_return", 10.0, 1)  # the first return is sent at once: nobody takes it
    assert buffer.sent == 0 and buffer.failed == 1 and nowhere.dropped == 1
    channel = Channel()
    buffer._send = channel.sender.send
    buffer.add("charts/episodic_return", 20.0, 2)
    assert buffer.flush(reliable=True)
    ((_, payload),) = channel.close()
    assert payload["scalars"]["charts/episodic_return"] == [20.0, 2, 2, 30.0, [10.0, 20.0]]


def test_non_finite_values_are_sent_as_null_and_never_summed():
    channel, clock = Channel(), Clock()
    buffer = ScalarBuffer(channel.sender.send, clock=clock)
    buffer.add("losses/value_loss", 1.0, 1)
    buffer.add("losses/value_loss", float("nan"), 2)
    buffer.add("charts/episodic_return", float("inf"), 2)
    buffer.flush(reliable=True)
    ((_, payload),) = channel.close()
    assert payload["scalars"]["losses/value_loss"] == [None, 2, 1, 1.0]
    assert payload["scalars"]["charts/episodic_return"] == [None, 2, 0, 0.0, []]


def test_a_burst_of_100k_scalars_stays_bounded_in_the_training_process():
    channel, clock = Channel(), Clock()
    buffer = ScalarBuffer(channel.sender.send, clock=clock)
    for i in range(100_000):
        buffer.add(f"debug/tag_{i}", float(i), i)
        if i % 10_000 == 0:
            clock.now += 1.0
    assert len(buffer._tags) == MAX_OTHER_TAGS and buffer.dropped_tags == 100_000 - MAX_OTHER_TAGS
    buffer.add("x" * 500, 1.0, 1)  # an absurd tag is dropped, never sent
    assert buffer.dropped_tags == 100_000 - MAX_OTHER_TAGS + 1
    for i in range(1000):  # the flood never crowds out CleanRL's own tags, which stay bounded too
        buffer.add(f"charts/tag_{i}", 1.0, i)
    assert len(buffer._tags) == MAX_TAGS and "charts/tag_0" in buffer._tags
    buffer.flush()
    for _, payload in channel.close():
        assert len(json.dumps(payload)) < 60_000 and len(payload["scalars"]) <= MAX_TAGS


def test_board_keeps_latest_values_and_a_bounded_return_window():
    board = MetricBoard(total_timesteps=10_000)
    for batch in range(1000):  # 1000 batches of 3 episodes each
        returns = [3.0 * batch, 3.0 * batch + 1, 3.0 * batch + 2]
        board.update(
            {
                "global_step": batch * 10,
                "scalars": {
                    "charts/episodic_return": [returns[-1], batch * 10, 3, sum(returns), returns],
                    "charts/episodic_length": [20.0, batch * 10, 3, 60.0],
                    "charts/SPS": [900.0, batch * 10, 1, 900.0],
                    "losses/policy_loss": [-0.01, batch * 10, 1, -0.01],
                    "charts/learning_rate": [2.5e-4, batch * 10, 1, 2.5e-4],
                },
            }
        )
    snap = board.snapshot()
    assert snap["global_step"] == 9990 and snap["progress"] == 0.999 and snap["episodes"] == 3000
    assert snap["episodic_return"] == 2999.0 and snap["episodic_length"] == 20.0 and snap["sps"] == 900.0
    assert snap["losses"] == {"policy_loss": -0.01} and snap["scalars"] == {"charts/learning_rate": 2.5e-4}
    assert list(board._returns) == [float(v) for v in range(3000 - RETURN_WINDOW, 3000)]  # the last 100 episodes
    assert snap["smoothed_episodes"] == RETURN_WINDOW
    assert math.isclose(snap["episodic_return_smoothed"], sum(range(3000 - RETURN_WINDOW, 3000)) / RETURN_WINDOW)
    json.dumps(snap, allow_nan=False)  # strict JSON


def test_board_stays_bounded_and_ignores_malformed_batches():
    board = MetricBoard(total_timesteps=100)
    for i in range(100_000):
        board.update({"global_step": i, "scalars": {f"debug/{i}": [1.0, i, 1, 1.0]}})
    assert len(board._latest) == MAX_OTHER_TAGS and len(board._kinds) == MAX_OTHER_TAGS
    for bad in (
        {},
        {"scalars": []},
        {"scalars": {"a": [1, 2]}},
        {"scalars": {"a": "x"}},
        {"scalars": {3: [1, 1, 1, 1]}},
    ):
        assert board.update(bad) is False
    board.update({"scalars": {"charts/episodic_return": ["NaN", -5, True, float("inf")]}})
    assert board.snapshot()["episodic_return"] is None and board.episodes == 0
    for i in range(1000):
        board.update({"scalars": {f"losses/{i}": [1.0, i, 1, 1.0], "charts/episodic_return": [5.0, i, 1, 5.0]}})
    assert len(board._latest) == MAX_TAGS and board.snapshot()["episodic_return"] == 5.0


def test_tags_are_classified_like_cleanrl_writes_them():
    assert classify("charts/episodic_return") == "return" and classify("eval/episodic_return") is None
    assert classify("charts/SPS") == "sps" and classify("losses/td_loss") == "loss"
    assert classify("charts/learning_rate") is None


def make_run(tmp_path, extras=None):
    config = build_config(
        {"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000, "extras": extras or {}}
    )
    run = RunContext(config, RunDirectory(tmp_path, "r1"), "cleanrl")
    stream = io.StringIO()
    run.emitter = EventEmitter("r1", stream=stream, sinks=[lambda record: plugin.mosaic_on_event(run, record)])
    return run, stream


def events_of(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_host_emits_metrics_events_at_a_bounded_rate_and_in_heartbeats(tmp_path):
    run, stream = make_run(tmp_path, {"metrics_interval_s": 3600})
    for i in range(1000):  # a flood of batches from the training process
        plugin.mosaic_on_child_message(
            run, MESSAGE_KIND, {"global_step": i, "scalars": {"charts/episodic_return": [float(i), i, 1, float(i)]}}
        )
    plugin.mosaic_on_child_message(run, "someone.else", {"scalars": {}})  # other kinds are ignored
    metrics = [e for e in events_of(stream) if e["event"] == "metrics"]
    assert len(metrics) == 1 and metrics[0]["payload"]["global_step"] == 0
    beat = plugin.mosaic_on_heartbeat(run)
    assert beat["metrics"]["global_step"] == 999 and beat["metrics"]["episodes"] == 1000
    plugin.mosaic_build_manifest(run, "completed")  # the last values go out before the end
    metrics = [e for e in events_of(stream) if e["event"] == "metrics"]
    assert len(metrics) == 2 and metrics[-1]["payload"]["global_step"] == 999


def test_scalar_hook_feeds_the_host_through_the_real_channel(tmp_path):
    from mosaic_analytics import bridge
    from mosaic_core.child import ChildContext

    run, stream = make_run(tmp_path)
    receiver = ChannelReceiver(
        new_address("r1"), lambda kind, payload: plugin.mosaic_on_child_message(run, kind, payload)
    )
    receiver.start()
    child = ChildContext(run_id="r1", run_dir=tmp_path / "r1", extras={}, channel=ChannelSender(receiver.address))
    saved, bridge._buffer = bridge._buffer, None
    try:
        for step in range(500):
            plugin.mosaic_on_scalar(child, "charts/episodic_return", float(step), step, None)
        bridge._buffer.flush(reliable=True)
    finally:
        bridge._buffer = saved
        receiver.close()
    assert plugin.mosaic_on_heartbeat(run)["metrics"]["global_step"] == 499
    assert [e["event"] for e in events_of(stream)] == ["metrics"]
