"""Which runs get FastLane, and every bad input named at dry-run time."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosaic_fastlane import settings
from mosaic_fastlane.settings import Settings, is_enabled, problems, resolve


@pytest.mark.parametrize(
    "extras, enabled",
    [
        ({}, False),
        ({"fastlane": True}, True),
        ({"fastlane": False, "fastlane_video_mode": "grid"}, False),
        ({"fastlane_video_mode": "single"}, True),
        ({"fastlane_video_mode": "grid"}, True),
        ({"fastlane_video_mode": "off", "fastlane": True}, False),
        ({"fastlane_slot": 2}, True),
        ({"other": 1}, False),
    ],
)
def test_how_fastlane_is_enabled(extras, enabled):
    assert is_enabled(extras) is enabled


@pytest.mark.parametrize(
    "extras, environ, expected",
    [
        ({"fastlane_video_mode": "movie"}, {}, "extras.fastlane_video_mode: 'movie' is not one of single, grid, off"),
        ({"fastlane": "yes"}, {}, "extras.fastlane: must be true or false"),
        ({"fastlane_slot": -1}, {}, "extras.fastlane_slot: must be an integer >= 0, got -1"),
        ({"fastlane_slot": "0"}, {}, "extras.fastlane_slot: must be an integer >= 0, got '0'"),
        ({"fastlane_slot": 4, "num_envs": 4}, {}, "extras.fastlane_slot: 4 is outside the run's 4 env(s) (0..3)"),
        ({"fastlane_slot": 8, "algo_params": {"num_envs": 2}}, {}, "outside the run's 2 env(s)"),
        ({"fastlane_grid_limit": 0}, {}, "extras.fastlane_grid_limit: must be an integer >= 1, got 0"),
        ({"fastlane_record": True}, {}, "extras.fastlane_record: must be an integer >= 1, got True"),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_INTERVAL_MS": "0"},
            "CLEANRL_FASTLANE_INTERVAL_MS: '0' must be a number of milliseconds > 0",
        ),
        ({"fastlane": True}, {"CLEANRL_FASTLANE_INTERVAL_MS": "-5"}, "CLEANRL_FASTLANE_INTERVAL_MS: '-5' must be"),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_INTERVAL_MS": "soon"},
            "CLEANRL_FASTLANE_INTERVAL_MS: 'soon' is not a number",
        ),
        ({"fastlane": True}, {"CLEANRL_FASTLANE_INTERVAL_MS": "nan"}, "must be a number of milliseconds > 0"),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_MAX_DIM": "big"},
            "CLEANRL_FASTLANE_MAX_DIM: 'big' is not a whole number",
        ),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_MAX_DIM": "8"},
            "CLEANRL_FASTLANE_MAX_DIM: '8' must be between 16 and 4096",
        ),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_RENDER_BUDGET": "0"},
            "CLEANRL_FASTLANE_RENDER_BUDGET: '0' must be a share of time",
        ),
        (
            {"fastlane": True},
            {"CLEANRL_FASTLANE_RENDER_BUDGET": "half"},
            "CLEANRL_FASTLANE_RENDER_BUDGET: 'half' is not a number",
        ),
    ],
)
def test_each_problem_names_its_key(extras, environ, expected):
    found = problems(extras, environ)
    assert len(found) == 1 and expected in found[0], found


def test_good_input_and_off_runs_have_no_problems():
    assert (
        problems(
            {
                "fastlane_video_mode": "grid",
                "fastlane_grid_limit": 4,
                "fastlane_record": 10,
                "num_envs": 8,
                "fastlane_slot": 7,
            },
            {"CLEANRL_FASTLANE_INTERVAL_MS": "33.3"},
        )
        == []
    )
    assert problems({}, {"CLEANRL_FASTLANE_INTERVAL_MS": "junk"}) == []  # env vars only matter when it is on


def test_resolve_and_round_trip_through_the_child_environment():
    resolved = resolve(
        {"fastlane_video_mode": "grid", "fastlane_grid_limit": 3, "algo_params": {"num_envs": 8}},
        "mosaic-fl-r",
        "/dev/shm",
        environ={"CLEANRL_FASTLANE_INTERVAL_MS": "25", "CLEANRL_FASTLANE_MAX_DIM": "128"},
    )
    assert (resolved.mode, resolved.slots, resolved.interval_ms, resolved.max_dim) == ("grid", 3, 25.0, 128)
    assert Settings.from_env({settings.CHILD_VAR: resolved.to_env()}) == resolved
    assert [resolved.publishes(i) for i in (None, 0, 2, 3)] == [False, True, True, False]
    single = resolve({"fastlane": True, "fastlane_slot": 1}, "s", "/dev/shm", environ={})
    assert (single.slots, single.interval_ms, single.max_dim) == (1, 100.0, 512)
    assert [single.publishes(i) for i in (0, 1, 2)] == [False, True, False] and single.slot_of(1) == 0
    assert Settings.from_env({}) is None and Settings.from_env({settings.CHILD_VAR: "{bad"}) is None


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


@given(
    st.dictionaries(st.sampled_from(settings.KEYS + ("fastlane_x", "num_envs", "algo_params")), values),
    st.dictionaries(
        st.sampled_from([settings.INTERVAL_VAR, settings.MAX_DIM_VAR, settings.BUDGET_VAR]), st.text(max_size=6)
    ),
)
def test_any_input_gives_problems_or_resolves_never_a_crash(extras, environ):
    found = problems(extras, environ)
    assert all(isinstance(p, str) and p.startswith(("extras.fastlane", "CLEANRL_")) for p in found)
    if not found:
        resolved = resolve(extras, "seg", "/dev/shm", environ=environ)
        assert resolved.mode in settings.MODES and resolved.interval_ms > 0 and resolved.slots >= 1
        assert 0 < resolved.render_budget <= 1 and 16 <= resolved.max_dim <= 4096
