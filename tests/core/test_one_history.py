"""A resumed run's events read as one history (mosaic_core.events.one_history): what an earlier
attempt reported past a later resume's from_step is left out, everything else kept in order."""

from __future__ import annotations

from mosaic_core.events import metric_steps, one_history


def metrics(step: int) -> dict:
    return {"event": "metrics", "payload": {"global_step": step}}


def test_an_earlier_attempts_metrics_past_the_resume_point_are_dropped():
    log = [
        {"event": "run_started"},
        metrics(100),
        metrics(200),
        metrics(300),
        {"event": "heartbeat", "payload": {"metrics": {"global_step": 300}}},
        {"event": "run_cancelled"},
        {"event": "run_resumed", "payload": {"from_step": 200}},
        {"event": "run_started"},
        metrics(250),
        {"event": "run_cancelled"},
        {"event": "run_resumed", "payload": {"from_step": 150}},
        {"event": "run_started"},
        metrics(175),
        metrics(400),
        {"event": "run_completed"},
    ]
    kept = one_history(log)
    assert metric_steps(kept) == [100, 175, 400]
    assert [e["event"] for e in kept].count("run_resumed") == 2 and kept[-1]["event"] == "run_completed"
    assert not any(e["event"] == "heartbeat" for e in kept)  # its step (300) is past both resumes


def test_a_run_never_resumed_is_kept_whole():
    log = [{"event": "run_started"}, metrics(1), metrics(1), metrics(2), {"event": "run_completed"}]
    assert one_history(log) == log
