"""extras -> flags: reserved keys, typed values, no injection, and the round trip through tyro."""

import copy
import dataclasses
import keyword
import math

import pytest
import tyro
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleanrl_worker.flags import CONFIG_FIELDS, extras_to_flags, flag_name, flag_problems
from cleanrl_worker.worker import OWN_KEYS
from mosaic_core.errors import ConfigError
from mosaic_core.plugins import load_plugin_host

HOST = load_plugin_host()  # the installed plugins, as a run sees them


def is_owned(key):
    from mosaic_core.contract import STANDARD_KEYS  # the run contract's keys: the core's

    return HOST.extras_owner(key) is not None or any(own.matches(key) for own in [*OWN_KEYS, *STANDARD_KEYS])


@dataclasses.dataclass
class Args:
    track: bool = False
    cuda: bool = True
    learning_rate: float = 2.5e-4
    num_envs: int = 1
    exp_name: str = "x"
    target_kl: float | None = None
    run_tag: str | None = "t"
    layers: list[int] = dataclasses.field(default_factory=lambda: [64, 64])
    names: list[str] = dataclasses.field(default_factory=lambda: ["a"])


def parse(argv, cls=Args):
    return tyro.cli(cls, args=argv)


def problem_of(extras) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        extras_to_flags(extras)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    return info.value


# ---------------------------------------------------------------------------- owned keys
DESIGN_KEYS = (
    "tensorboard_dir",
    "track_wandb",
    "algo_params",
    "notes",
    "mode",
    "policy_path",
    "checkpoint_path",
    "curriculum_schedule",
    "fastlane_video_mode",
    "eval_episodes",
    "wandb_api_key",
    "wandb_run_path",
    "schema_id",
    "schema_version",
    "supports_pause",
    "supports_checkpoint",
    "optuna_db",
    "checkpoints_dir",
    "cleanrl_home",
    "metrics_interval_s",
    "interactive",
    "fastlane",
)


@pytest.mark.parametrize("key", DESIGN_KEYS)
def test_the_design_list_of_reserved_keys_is_claimed_by_plugins_or_the_worker(key):
    assert is_owned(key), key


def test_script_flags_are_owned_by_nobody():
    assert not is_owned("learning_rate") and not is_owned("track") and not is_owned("num_envs")


def test_algo_params_become_flags_and_win_on_a_clash():
    extras = {"num_envs": 2, "learning_rate": 0.1, "algo_params": {"learning_rate": 0.5, "mode": "fast"}}
    argv = extras_to_flags(extras)
    assert argv == ["--num-envs=2", "--learning-rate=0.5", "--mode=fast"]  # algo_params keys never reserved
    assert extras_to_flags({"algo_params": None}) == [] and extras_to_flags({}) == [] and extras_to_flags(None) == []


def test_the_function_is_pure():
    extras = {"layers": [1, 2], "algo_params": {"track": False}}
    before = copy.deepcopy(extras)
    assert extras_to_flags(extras) == extras_to_flags(extras)
    assert extras == before


# ---------------------------------------------------------------------------- values
def test_booleans_are_flag_and_no_flag_and_false_never_vanishes():
    argv = extras_to_flags({"track": True, "cuda": False})
    assert argv == ["--track", "--no-cuda"]
    args = parse(argv)
    assert args.track is True and args.cuda is False


def test_null_is_tyros_none_and_empty_list_is_a_bare_flag():
    argv = extras_to_flags({"target_kl": None, "run_tag": None, "layers": []})
    assert argv == ["--target-kl=None", "--run-tag=None", "--layers"]
    args = parse(argv)
    assert args.target_kl is None and args.run_tag is None and args.layers == []


def test_sequences_are_separate_values_including_negative_numbers():
    argv = extras_to_flags({"layers": [-1, 2], "names": ["a b", "", "c=d"]})
    assert argv == ["--layers", "-1", "2", "--names", "a b", "", "c=d"]
    args = parse(argv)
    assert args.layers == [-1, 2] and args.names == ["a b", "", "c=d"]


def test_floats_round_trip_exactly():
    for value in (0.1, 1e-300, -2.5e-4, 1e300, float("inf"), -float("inf")):
        assert parse(extras_to_flags({"learning_rate": value})).learning_rate == value
    assert math.isnan(parse(extras_to_flags({"learning_rate": float("nan")})).learning_rate)


def test_a_value_can_never_inject_a_flag():
    for evil in ("--track", "--track=True", "-h", "--help", "--num-envs 99", "-", "--"):
        argv = extras_to_flags({"exp_name": evil})
        assert len(argv) <= 2
        args = parse(argv)
        assert args.exp_name == evil and args.track is False and args.num_envs == 1
    assert extras_to_flags({"exp_name": "--track"}) == ["--exp-name=--track"]
    assert extras_to_flags({"num_envs": -3}) == ["--num-envs=-3"]
    error = problem_of({"names": ["ok", "--track"]})
    assert "extras.names[1]" in str(error) and "starts with '-'" in str(error)


def test_objects_and_bad_keys_and_values_are_errors_naming_the_key():
    assert "extras.policy" in str(problem_of({"policy": {"a": 1}}))
    assert "extras.algo_params.net" in str(problem_of({"algo_params": {"net": {"a": 1}}}))
    assert "extras.algo_params" in str(problem_of({"algo_params": [1, 2]}))
    assert "extras.layers[1]" in str(problem_of({"layers": [1, [2]]}))
    assert "not a valid flag name" in str(problem_of({"num-envs": 2}))
    assert "not a valid flag name" in str(problem_of({"algo_params": {"x --track": 1}}))
    assert "not a valid flag name" in str(problem_of({"1abc": 2}))
    assert "NUL" in str(problem_of({"exp_name": "a\x00b"}))
    assert "cannot be passed" in str(problem_of({"exp_name": object()}))
    assert "extras: must be an object" in str(problem_of([1]))
    with pytest.raises(ConfigError, match=r"extras.policy: .* \(file run.json\)$"):
        extras_to_flags({"policy": {}}, source="run.json")


@pytest.mark.parametrize("key", sorted(CONFIG_FIELDS))
def test_config_fields_are_not_extras(key):
    error = problem_of({key: 1})
    assert f"extras.{key}" in str(error) and error.field == f"extras.{key}"
    assert f"extras.algo_params.{key}" in str(problem_of({"algo_params": {key: 1}}))


def test_all_problems_are_listed_for_validate_config():
    problems = flag_problems({"a": {}, "b": [{}], "algo_params": {"seed": 1}})
    assert [p.split(":")[0] for p in problems] == ["extras.a", "extras.b[0]", "extras.algo_params.seed"]
    assert "(and 2 more problems)" in str(problem_of({"a": {}, "b": [{}], "algo_params": {"seed": 1}}))


def test_flag_names_follow_tyros_rule():
    assert flag_name("learning_rate") == "--learning-rate"
    assert flag_name("lambda_") == "--lambda_" and flag_name("_private_x") == "--_private-x"

    @dataclasses.dataclass
    class Odd:
        lambda_: float = 0.0
        _private_x: int = 0
        a__b: int = 0

    args = parse(extras_to_flags({"lambda_": 0.5, "_private_x": 3, "a__b": 4}), Odd)
    assert (args.lambda_, args._private_x, args.a__b) == (0.5, 3, 4)


# ---------------------------------------------------------------------------- property: round trip
TYPES = {
    bool: st.booleans(),
    int: st.integers(min_value=-(10**30), max_value=10**30),
    float: st.floats(allow_nan=False),
    str: st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
    int | None: st.none() | st.integers(),
    str | None: st.none()
    | st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))).filter(lambda s: s != "None"),
    list[int]: st.lists(st.integers()),
    list[float]: st.lists(st.floats(allow_nan=False)),
    list[str]: st.lists(
        st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))).filter(
            lambda s: not s.startswith("-")
        )
    ),
}
DEFAULTS = {bool: False, int: 0, float: 0.0, str: "", int | None: 7, str | None: "d"}
FIELD_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in CONFIG_FIELDS and n != "help" and not n.startswith("no_")
)


@st.composite
def args_and_extras(draw):
    names = draw(st.lists(FIELD_NAME, min_size=1, max_size=8, unique_by=lambda n: flag_name(n)))
    types = [draw(st.sampled_from(list(TYPES))) for _ in names]
    fields = [
        (
            n,
            t,
            dataclasses.field(default_factory=list)
            if t in (list[int], list[float], list[str])
            else dataclasses.field(default=DEFAULTS[t]),
        )
        for n, t in zip(names, types)
    ]
    cls = dataclasses.make_dataclass("Args", fields)
    values = {n: draw(TYPES[t]) for n, t in zip(names, types) if draw(st.booleans())}
    in_params = {n for n in values if draw(st.booleans())}
    extras = {n: v for n, v in values.items() if n not in in_params}
    if in_params:
        extras["algo_params"] = {n: values[n] for n in in_params}
    return cls, extras, values


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args_and_extras())
def test_tyro_parses_back_what_went_in(case):
    cls, extras, values = case
    parsed = tyro.cli(cls, args=extras_to_flags(extras))
    for name, value in values.items():
        assert getattr(parsed, name) == value, (name, value, extras_to_flags(extras))


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
        ),
        max_size=5,
    )
)
def test_any_json_gives_flags_or_a_config_error(extras):
    try:
        argv = extras_to_flags(extras)
    except ConfigError as exc:
        assert str(exc).startswith("extras")
        return
    keys = [k for k in extras if k != "algo_params"] + list(extras.get("algo_params") or {})
    allowed = {flag_name(k) for k in keys} | {"--no-" + flag_name(k)[2:] for k in keys}
    for item in argv:  # anything that looks like an option is one of ours, glued values included
        if item.startswith("-") and not _is_number(item):
            assert item.split("=", 1)[0] in allowed, (item, argv)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
