"""Schedules: condition parsing (hypothesis properties), stage forms, presets, problems."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic_curriculum.schedule import (
    DEFAULT_RETURN_WINDOW,
    METRICS,
    PRESETS,
    Clause,
    Condition,
    ConditionError,
    StageProgress,
    first_env_id,
    load_schedule,
    parse_condition,
    parse_schedule,
)

counts = st.integers(min_value=0, max_value=10**12)
returns = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
clauses = st.one_of(
    st.builds(Clause, st.sampled_from(["steps", "episodes"]), counts),
    st.builds(Clause, st.just("episode_return"), returns),
)
conditions = st.lists(clauses, min_size=1, max_size=4).map(lambda cs: Condition(tuple(cs)))
spaces = st.text(alphabet=" \t", max_size=2)


@given(conditions)
def test_a_condition_round_trips_through_its_text(condition):
    assert parse_condition(str(condition)) == condition


@given(conditions, st.data())
def test_whitespace_around_tokens_is_ignored(condition, data):
    parts = []
    for clause in condition.clauses:
        metric, value = str(clause).split(">=")
        pad = [data.draw(spaces) for _ in range(4)]
        parts.append(f"{pad[0]}{metric}{pad[1]}>={pad[2]}{value}{pad[3]}")
    assert parse_condition("|".join(parts)) == condition


@given(st.text(max_size=40))
def test_any_text_parses_or_fails_with_a_condition_error(text):
    try:
        condition = parse_condition(text)
    except ConditionError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(c.metric in METRICS for c in condition.clauses)


@given(conditions, counts, counts, st.lists(returns, max_size=8), st.integers(1, 8))
def test_a_condition_fires_on_the_first_clause_that_holds(condition, steps, episodes, recent, window):
    progress = StageProgress(return_window=window)
    progress.add(steps, episodes, recent)
    kept = recent[-window:]

    def holds(clause):
        if clause.metric == "steps":
            return steps >= clause.threshold
        if clause.metric == "episodes":
            return episodes >= clause.threshold
        return len(kept) == window and sum(kept) / window >= clause.threshold

    expected = next((c for c in condition.clauses if holds(c)), None)
    assert condition.fired(progress) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("steps>5", "is not 'metric>=value'"),
        ("stepz>=5", "unknown metric 'stepz'"),
        ("steps>=5|", "is not 'metric>=value'"),
        ("steps>=-5", "not a whole number"),
        ("episodes>=1.5", "not a whole number"),
        ("episode_return>=high", "not a number"),
        ("episode_return>=nan", "not a number"),
        ("steps>=5&episodes>=2", "'&' \\(AND\\) is not supported"),
    ],
)
def test_bad_conditions_say_what_is_wrong(text, message):
    with pytest.raises(ConditionError, match=message):
        parse_condition(text)


def test_episode_return_needs_a_full_window():
    condition = parse_condition("episode_return>=0.5")
    progress = StageProgress(return_window=3)
    progress.add(10, 2, [1.0, 1.0])
    assert condition.fired(progress) is None  # two lucky episodes are not enough
    progress.add(5, 1, [0.0])
    assert condition.fired(progress) == Clause("episode_return", 0.5)  # mean 2/3
    progress.add(5, 1, [0.0])
    assert condition.fired(progress) is None  # the window rolls: mean 1/3


def test_stage_forms():
    schedule = load_schedule(
        [
            {"env_id": "CartPole-v1", "steps": 5000},
            {"env_id": "CartPole-v0", "until": "episodes>=10|episode_return>=-20.5", "return_window": 5},
            {"env_id": "CartPole-v1"},
        ]
    )
    first, second, last = schedule.stages
    assert str(first.until) == "steps>=5000" and first.return_window == DEFAULT_RETURN_WINDOW
    assert second.until.clauses == (Clause("episodes", 10), Clause("episode_return", -20.5))
    assert second.return_window == 5
    assert str(last.until) == "steps>=100000"  # the default, never used for the last stage
    assert [s.index for s in schedule.stages] == [0, 1, 2]
    assert schedule.is_last(2) and not schedule.is_last(1)
    assert schedule.to_dict()["stages"][-1]["until"] is None


@pytest.mark.parametrize(
    "name, env_ids",
    [
        (
            "babyai_goto",
            ["BabyAI-GoToRedBallNoDists-v0", "BabyAI-GoToRedBall-v0", "BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0"],
        ),
        (
            "doorkey",
            [
                "MiniGrid-DoorKey-5x5-v0",
                "MiniGrid-DoorKey-6x6-v0",
                "MiniGrid-DoorKey-8x8-v0",
                "MiniGrid-DoorKey-16x16-v0",
            ],
        ),
    ],
)
def test_presets_resolve_by_name(name, env_ids):
    schedule, problems = parse_schedule(name)
    assert problems == []
    assert schedule.preset == name
    assert [s.env_id for s in schedule.stages] == env_ids
    assert all(s.until.clauses for s in schedule.stages)
    assert first_env_id({"curriculum_schedule": name}) == env_ids[0]
    assert name in PRESETS


@pytest.mark.parametrize(
    "value, expected",
    [
        ("nope", ["extras.curriculum_schedule: unknown preset 'nope' (presets: babyai_goto, doorkey)"]),
        ([], ["extras.curriculum_schedule: the list of stages is empty; give at least one stage"]),
        (
            {"env_id": "CartPole-v1"},
            ["extras.curriculum_schedule: must be a preset name (babyai_goto, doorkey) or a list of stages, got dict"],
        ),
        (
            [{"env_id": "CartPole-v1"}, "CartPole-v0"],
            [
                "extras.curriculum_schedule[1]: a stage must be an object like "
                '{"env_id": "CartPole-v1", "steps": 10000}, got str'
            ],
        ),
        (
            [{"env_id": "CartPole-v1", "until": "stepz>=5"}],
            [
                "extras.curriculum_schedule[0].until: unknown metric 'stepz' in 'stepz>=5' "
                "(use steps, episodes, episode_return)"
            ],
        ),
        (
            [{"env_id": "A", "steps": 5}, {"env_id": "B", "steps": 0, "colour": "red"}],
            [
                "extras.curriculum_schedule[1].colour: unknown key (allowed: env_id, until, steps, return_window)",
                "extras.curriculum_schedule[1].steps: must be an integer > 0, got 0",
            ],
        ),
        ([{"until": "steps>=5"}], ["extras.curriculum_schedule[0].env_id: required, a non-empty string (got None)"]),
        (
            [{"env_id": "A", "steps": 5, "until": "episodes>=1"}],
            ["extras.curriculum_schedule[0]: give 'steps' or 'until', not both (write both in 'until' joined by '|')"],
        ),
        (
            [{"env_id": "A", "return_window": True}],
            ["extras.curriculum_schedule[0].return_window: must be an integer > 0, got True"],
        ),
        (
            [{"env_id": "A", "until": 5}],
            ["extras.curriculum_schedule[0].until: must be a string like 'steps>=100000', got int"],
        ),
    ],
)
def test_malformed_schedules_name_the_stage_and_key(value, expected):
    schedule, problems = parse_schedule(value)
    assert schedule is None
    assert problems == expected
    assert first_env_id({"curriculum_schedule": value}) is None
    with pytest.raises(ValueError):
        load_schedule(value)


def test_every_problem_of_a_schedule_is_reported_together():
    _, problems = parse_schedule([{"env_id": ""}, 3, {"env_id": "B", "until": "x"}])
    assert [p.split(":")[0] for p in problems] == [
        "extras.curriculum_schedule[0].env_id",
        "extras.curriculum_schedule[1]",
        "extras.curriculum_schedule[2].until",
    ]


@settings(max_examples=50)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"env_id": st.sampled_from(["CartPole-v1", "CartPole-v0"]), "steps": st.integers(1, 10**9)}
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_valid_list_of_stages_keeps_its_order_and_budgets(stages):
    schedule = load_schedule(stages)
    assert [(s.env_id, str(s.until)) for s in schedule.stages] == [
        (s["env_id"], f"steps>={s['steps']}") for s in stages
    ]
