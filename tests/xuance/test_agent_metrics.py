"""Per-agent scalars through the live metric bridge: the training process's buffer batches them
beside the team's, the host's board keeps each agent's latest values and smoothed return."""

from mosaic_analytics.board import MetricBoard
from mosaic_analytics.bridge import MAX_AGENT_KEYS, ScalarBuffer


def test_agent_scalars_reach_the_board_per_agent():
    sent = []
    buffer = ScalarBuffer(lambda kind, payload, reliable: sent.append(payload) or True, interval=1e9)
    buffer.add("charts/episodic_return", -30.0, 100)
    for agent, score in (("agent_0", -9.0), ("agent_1", -11.0), ("agent_0", -7.0)):
        buffer.add("charts/episodic_return", score, 100, agent=agent)
    buffer.add("losses/value_loss", 0.5, 100)
    assert buffer.flush()
    payload = sent[-1]
    assert payload["agents"]["agent_0"]["charts/episodic_return"] == [-7.0, 100, 2, -16.0]
    board = MetricBoard(total_timesteps=1000)
    assert board.update(payload)
    snapshot = board.snapshot()
    assert snapshot["episodic_return"] == -30.0  # the team's
    assert snapshot["agents"]["agent_0"]["episodic_return"] == -7.0
    assert snapshot["agents"]["agent_0"]["episodic_return_smoothed"] == -8.0
    assert snapshot["agents"]["agent_1"]["episodes"] == 1
    assert "agents" not in MetricBoard().snapshot()  # single-agent runs look as before


def test_agent_keys_are_bounded():
    sent = []
    buffer = ScalarBuffer(lambda kind, payload, reliable: sent.append(payload) or True, interval=1e9)
    for i in range(MAX_AGENT_KEYS + 10):
        buffer.add("charts/episodic_return", 1.0, 1, agent=f"agent_{i}")
    buffer.add("x", 1.0, 1, agent="a" * 500)
    assert buffer.dropped_tags == 11
    buffer.flush()
    assert sum(len(tags) for tags in sent[-1]["agents"].values()) == MAX_AGENT_KEYS


def test_dashboard_draws_each_agent_beside_the_team():
    from mosaic_dashboard.curves import Curves

    curves = Curves()
    new = curves.add({"global_step": 5, "episodic_return": -3.0,
                      "agents": {"agent_0": {"episodic_return": -1.0}, "agent_1": {"episodic_return": None}}})
    assert new == {"episodic_return": [5, -3.0], "episodic_return@agent_0": [5, -1.0]}
