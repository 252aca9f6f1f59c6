"""Every hook: its docstring, its accessor's combination rule, and a real run that calls it."""

import inspect
import json
import types

import pytest

from mosaic_core import hookspecs
from mosaic_core.cli.commands import CliCommand
from mosaic_core.config import build_config
from mosaic_core.errors import PluginError
from mosaic_core.plugins import HOOK_NAMES, PluginHost
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.types import ChildEvent, ExtrasKey
from tests.core.distributions import make_distribution


def test_every_hook_is_documented_and_tested():
    source = open(__file__).read()
    for name in HOOK_NAMES:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Called" in doc and "Return" in doc, f"{name} must say when it is called and what it returns"
        assert "**Example:**" in doc and "@hookimpl" in doc.split("**Example:**")[-1], f"{name} needs an example"
        assert source.count(name) >= 2, f"{name} has no test here"


def module(name, **functions):
    mod = types.ModuleType(name)
    for hook, fn in functions.items():
        setattr(mod, hook, hookspecs.hookimpl(fn))
    return mod


def host_with(*modules):
    host = PluginHost(trace=False)
    for mod in modules:
        host.register_module(mod, mod.__name__)
    return host


@pytest.fixture
def run(tmp_path):
    config = build_config({"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10})
    return RunContext(config, RunDirectory(tmp_path, "r1"), "cleanrl")


def test_mosaic_on_heartbeat_merges_and_isolates_a_conflict(run):
    a = module("a", mosaic_on_heartbeat=lambda run: {"x": 1})
    b = module("b", mosaic_on_heartbeat=lambda: {"y": 2})  # a subset of the arguments is fine
    assert host_with(a, b).heartbeat_fields(run) == {"x": 1, "y": 2}
    c = module("c", mosaic_on_heartbeat=lambda run: {"x": 3, "z": 4})
    host = host_with(a, c)
    assert host.heartbeat_fields(run) in ({"x": 1, "z": 4}, {"x": 3, "z": 4})  # only the clashing key is dropped
    [failure] = host.failures.values()
    assert "'x' is already contributed by" in failure.error
    host = host_with(module("d", mosaic_on_heartbeat=lambda: {"pid": 0, "ok": 1}), b)
    assert host.heartbeat_fields(run, reserved={"pid"}) == {"ok": 1, "y": 2}
    assert "host's heartbeat field 'pid'" in next(iter(host.failures.values())).error


def test_mosaic_build_manifest_drops_only_the_broken_plugins_sections(run):
    a = module("a", mosaic_build_manifest=lambda run, status: {"tensorboard": {"status": status}})
    assert host_with(a).build_manifest(run, "completed") == {"tensorboard": {"status": "completed"}}
    host = host_with(
        a, module("b", mosaic_build_manifest=lambda: ["oops"]), module("c", mosaic_build_manifest=lambda: 1 / 0)
    )
    assert host.build_manifest(run, "failed") == {"tensorboard": {"status": "failed"}}
    assert sorted((f.plugin, f.hook) for f in host.failures.values()) == [
        ("b", "mosaic_build_manifest"),
        ("c", "mosaic_build_manifest"),
    ]
    assert "expected a dict" in host.failures["b", "mosaic_build_manifest"].error
    assert "ZeroDivisionError" in host.failures["c", "mosaic_build_manifest"].error


def test_mosaic_terminal_payload_reaches_the_terminal_event_and_the_manifest_names_failures(run):
    from mosaic_core.manifest import record_run_end

    seen = []
    a = module(
        "a",
        mosaic_build_manifest=lambda: {"counts": {"n": 3}},
        mosaic_terminal_payload=lambda status, manifest: seen.append(manifest) or {"n": manifest["counts"]["n"]},
    )
    huge = module("huge", mosaic_terminal_payload=lambda: {"blob": "x" * 40_000})
    host_field = module("host_field", mosaic_terminal_payload=lambda: {"returncode": 7, "fine": 1})
    broken = module("broken", mosaic_terminal_payload=lambda: 1 / 0)
    run.directory.create()
    payload = record_run_end(run, host_with(a, huge, host_field, broken), "failed", {"error": "boom"}, started=False)
    assert payload == {"error": "boom", "n": 3, "fine": 1}  # the host's fields stay the host's
    assert seen[0]["status"] == "failed" and seen[0]["counts"] == {"n": 3}  # the manifest as it is written
    written = json.loads(run.directory.manifest.read_text())
    failures = {f["plugin"]: f["error"] for f in written["plugins"]["hook_failures"]}
    assert set(failures) == {"huge", "host_field", "broken"}
    assert (
        "at most 32768" in failures["huge"] and "host's terminal payload field 'returncode'" in failures["host_field"]
    )


def test_mosaic_check_run_joins_problems_and_counts_a_raising_check(tmp_path):
    fine = module("fine", mosaic_check_run=lambda run_dir: None)
    strict = module("strict", mosaic_check_run=lambda run_dir: [f"{run_dir.name}: no report"])
    broken = module("broken", mosaic_check_run=lambda: 1 / 0)
    host = host_with(fine, strict, broken)
    for _ in range(2):  # a check that raises again is reported again
        problems = host.check_run(tmp_path)
        assert sorted(problems) == [
            "broken: its check failed: ZeroDivisionError: division by zero",
            f"strict: {tmp_path.name}: no report",
        ]


def test_mosaic_child_env_values_are_strings(run):
    assert host_with(module("a", mosaic_child_env=lambda: {"A": "1"})).child_env(run) == {"A": "1"}
    with pytest.raises(PluginError, match="must be strings"):
        host_with(module("b", mosaic_child_env=lambda: {"B": 2})).child_env(run)
    with pytest.raises(PluginError, match="plugin 'c' failed in mosaic_child_env: KeyError"):
        host_with(module("c", mosaic_child_env=lambda: {}["x"])).child_env(run)


def test_mosaic_build_args_and_mosaic_validate_config_concatenate(run):
    a = module("a", mosaic_build_args=lambda config: ["--track"], mosaic_validate_config=lambda: ["bad a"])
    b = module("b", mosaic_build_args=lambda: ["--x", "1"], mosaic_validate_config=lambda config: None)
    host = host_with(a, b)
    assert sorted(host.build_args(run.config)) == ["--track", "--x", "1"]
    assert host.validate_config(run.config) == ["bad a"]
    with pytest.raises(PluginError, match="plugin 'c' returned '--oops'; expected a list of strings"):
        host_with(module("c", mosaic_build_args=lambda: "--oops")).build_args(run.config)


def test_mosaic_run_settings_are_typed_descriptors_one_per_type(run):
    from mosaic_core.types import TrackingSettings

    a = module("a", mosaic_run_settings=lambda config: [TrackingSettings(project=config.env_id)])
    assert host_with(a).run_settings(run.config) == [("a", TrackingSettings(project="CartPole-v1"))]
    b = module("b", mosaic_run_settings=lambda: [TrackingSettings()])
    with pytest.raises(PluginError, match="setting TrackingSettings is already published by 'b'"):
        host_with(a, b).run_settings(run.config)
    with pytest.raises(PluginError, match="expected a frozen dataclass instance"):
        host_with(module("c", mosaic_run_settings=lambda: [{"track": True}])).run_settings(run.config)


def test_mosaic_private_run_folders_are_joined_and_a_bad_name_isolates_its_plugin(tmp_path):
    from mosaic_core.runs import RunDirectory
    from mosaic_core.runstore import artifacts

    a = module("a", mosaic_private_run_folders=lambda: ["tracker"])
    b = module("b", mosaic_private_run_folders=lambda: ["cache", "tracker"])
    bad = module("bad", mosaic_private_run_folders=lambda: ["../up"])
    host = host_with(a, b, bad)
    assert host.private_run_folders() == {"tracker", "cache"}
    assert [(r["plugin"], r["hook"]) for r in host.failure_records()] == [("bad", "mosaic_private_run_folders")]
    # The installed plugins' folders are what a scan of a run directory leaves out.
    folder = next(iter(artifacts.skipped_dirs() - artifacts.SKIP_DIRS))
    for where in (folder, "kept"):
        (tmp_path / "run" / where).mkdir(parents=True)
        (tmp_path / "run" / where / "model_7.pt").write_bytes(b"x")
    scanned = artifacts.scan(RunDirectory(tmp_path, "run"), [])
    assert [c["path"] for c in scanned["checkpoints"]["files"]] == ["kept/model_7.pt"]


def test_mosaic_config_defaults_fill_only_missing_fields():
    a = module("a", mosaic_config_defaults=lambda data: {"env_id": "Stage0-v0", "algo": "never"})
    host = host_with(a)
    assert host.config_defaults({"algo": "ppo"}) == {"env_id": "Stage0-v0"}
    config = build_config({"algo": "ppo", "total_timesteps": 5}, generate_run_id=True, defaults=host.config_defaults)
    assert config.env_id == "Stage0-v0" and config.algo == "ppo"
    with pytest.raises(PluginError, match="config default 'env_id' is already contributed by"):
        host_with(a, module("b", mosaic_config_defaults=lambda: {"env_id": "x"})).config_defaults({})


def test_mosaic_extras_keys_declare_ownership_and_overlaps_name_both():
    a = module("a", mosaic_extras_keys=lambda: [ExtrasKey("thresh_level"), ExtrasKey("a_", prefix=True)])
    host = host_with(a)
    assert host.extras_owner("thresh_level") == "a" and host.extras_owner("a_x") == "a"
    assert host.extras_owner("schema_id") == "host" and host.extras_owner("learning_rate") is None
    b = module("b", mosaic_extras_keys=lambda: [ExtrasKey("a_b")])
    with pytest.raises(PluginError, match="is owned by both") as info:
        host_with(a, b).extras_keys()
    assert "'a'" in str(info.value) and "'b'" in str(info.value) and "a_b" in str(info.value)
    with pytest.raises(PluginError, match="expected a list of ExtrasKey"):
        host_with(module("c", mosaic_extras_keys=lambda: ["thresh_level"])).extras_keys()


def test_mosaic_child_events_are_one_vocabulary():
    a = module("a", mosaic_child_events=lambda: [ChildEvent("stage_done")])
    b = module("b", mosaic_child_events=lambda: [ChildEvent("stage_done"), ChildEvent("other")])
    assert host_with(a, b).child_events() == {"stage_done", "other", "note", "checkpoint_saved"}  # + the host's


def test_mosaic_cli_commands_drop_a_duplicate_and_name_both():
    command = CliCommand("hello", "say hello", lambda p: None, lambda ns: 0)
    a = module("a", mosaic_cli_commands=lambda: [command])
    assert host_with(a).cli_commands() == [command]
    host = host_with(a, module("b", mosaic_cli_commands=lambda: [command]))
    assert host.cli_commands() == [command]
    assert "already contributed by" in next(iter(host.failures.values())).error


def test_mosaic_env_make_kwargs_and_mosaic_wrap_env_compose(run):
    a = module(
        "a",
        mosaic_env_make_kwargs=lambda env_id: {"render_mode": "rgb_array"},
        mosaic_wrap_env=lambda env: lambda e: ("A", e),
    )
    b = module("b", mosaic_wrap_env=lambda env_index: (lambda e: ("B", e)) if env_index == 0 else None)
    host = host_with(a, b)
    assert host.env_make_kwargs(None, "CartPole-v1", 0, {}) == {"render_mode": "rgb_array"}
    wrapped = host.wrap_env(None, "env", "CartPole-v1", 0)
    assert sorted([wrapped[0], wrapped[1][0]]) == ["A", "B"] and wrapped[1][1] == "env"
    assert host.wrap_env(None, "env", "CartPole-v1", 1) == ("A", "env")
    broken = module("c", mosaic_wrap_env=lambda env: lambda e: 1 / 0)
    assert host_with(a, broken).wrap_env(None, "env", "CartPole-v1", 1) == ("A", "env")


def test_lifecycle_hooks_are_called_and_run_finished_survives_failures(run):
    calls = []
    a = module(
        "a",
        mosaic_run_started=lambda run: calls.append("started"),
        mosaic_on_event=lambda event: calls.append(event["event"]),
        mosaic_on_child_message=lambda kind, payload: calls.append((kind, payload)),
        mosaic_run_finished=lambda status: 1 / 0,
    )
    b = module("b", mosaic_run_finished=lambda status: calls.append(("finished", status)))
    host = host_with(a, b)
    host.run_started(run)
    host.on_event(run, {"event": "heartbeat"})
    host.on_child_message(run, "metrics", {"x": 1})
    host.run_finished(run, "failed")
    assert calls == ["started", "heartbeat", ("metrics", {"x": 1}), ("finished", "failed")]
    [record] = host.failure_records()
    assert (
        record["plugin"] == "a" and record["hook"] == "mosaic_run_finished" and "ZeroDivisionError" in record["error"]
    )


def test_mosaic_run_scalars_takes_the_first_series_and_skips_a_failing_reader(run):
    broken = module("broken", mosaic_run_scalars=lambda run_dir, tag: 1 / 0)
    silent = module("silent", mosaic_run_scalars=lambda run_dir, tag: None)
    reader = module("reader", mosaic_run_scalars=lambda run_dir, tag: [(1, 2.0), (2, 3.5)] if tag == "x" else None)
    host = host_with(broken, silent, reader)
    assert host.run_scalars(run.run_dir, "x") == [(1, 2.0), (2, 3.5)]
    assert host.run_scalars(run.run_dir, "y") is None
    assert [r["plugin"] for r in host.failure_records()] == ["broken"]
    assert host_with().run_scalars(run.run_dir, "x") is None


def test_mosaic_run_relay_keeps_relays_and_names_a_wrong_or_failing_one(run):
    from mosaic_core.types import RunRelay

    relay = RunRelay()
    good = module("good", mosaic_run_relay=lambda run_id, extras, side: relay if side == "node" else None)
    wrong = module("wrong", mosaic_run_relay=lambda run_id, extras, side: "frames")
    broken = module("broken", mosaic_run_relay=lambda run_id, extras, side: 1 / 0)
    host = host_with(good, wrong, broken)
    assert host.run_relays(run.run_id, {}, "node") == {"good": relay}
    assert host.run_relays(run.run_id, {}, "caller") == {}
    assert {r["plugin"] for r in host.failure_records()} == {"wrong", "broken"}


def test_mosaic_frame_source_gives_the_first_source_and_names_a_wrong_or_failing_one(tmp_path):
    from mosaic_core import FrameSource, NoFrames

    class Frames(FrameSource):
        def __init__(self, run_dir, extras):
            self.run_dir, self.publishing = run_dir, bool(extras.get("frames"))

        def open(self):
            raise NoFrames(f"run {self.run_dir.name} has ended")

    good = module("good", mosaic_frame_source=lambda run_dir, extras: Frames(run_dir, extras))
    wrong = module("wrong", mosaic_frame_source=lambda run_dir, extras: "a reader")
    broken = module("broken", mosaic_frame_source=lambda run_dir, extras: 1 / 0)
    source = host_with(good, wrong, broken).frame_source(tmp_path / "r1", {"frames": True})
    assert isinstance(source, Frames) and source.publishing
    with pytest.raises(NoFrames, match="run r1 has ended"):
        source.open()
    host = host_with(wrong, broken)
    assert host.frame_source(tmp_path / "r1", {}) is None
    assert {r["plugin"] for r in host.failure_records()} == {"wrong", "broken"}


def test_mosaic_env_switch_gives_the_first_switch_and_names_a_wrong_or_failing_one():
    from mosaic_core import EnvSwitch

    class Stages(EnvSwitch):
        def stage(self):
            return 1

        def env_id(self, stage):
            return ["CartPole-v1", "CartPole-v0"][stage]

    good = module("good", mosaic_env_switch=lambda child: Stages() if child == "curriculum run" else None)
    wrong = module("wrong", mosaic_env_switch=lambda child: "CartPole-v0")
    broken = module("broken", mosaic_env_switch=lambda child: 1 / 0)
    host = host_with(good, wrong, broken)
    switch = host.env_switch("curriculum run")
    assert isinstance(switch, Stages) and switch.env_id(switch.stage()) == "CartPole-v0"
    assert host.env_switch("plain run") is None
    assert {r["plugin"] for r in host.failure_records()} == {"wrong", "broken"}


def test_training_process_hooks_in_process():
    seen = []
    a = module(
        "a",
        mosaic_child_setup=lambda child: seen.append(("setup", child)),
        mosaic_on_frame=lambda frame, info: seen.append(("frame", frame, info)),
        mosaic_on_scalar=lambda tag, value, step: seen.append(("scalar", tag, value, step)),
    )
    host = host_with(a)
    host.child_setup("ctx")
    host.on_frame("ctx", "pixels", "info")
    host.on_scalar("ctx", "charts/SPS", 3.0, 7)
    assert seen == [("setup", "ctx"), ("frame", "pixels", "info"), ("scalar", "charts/SPS", 3.0, 7)]


def test_a_failing_hook_is_named_once_and_costs_only_its_plugin(run, capsys):
    host = host_with(
        module("grumpy", mosaic_on_heartbeat=lambda: {}["missing"], mosaic_on_scalar=lambda: 1 / 0),
        module("fine", mosaic_on_heartbeat=lambda: {"fine": True}),
    )
    assert host.heartbeat_fields(run) == host.heartbeat_fields(run) == {"fine": True}
    host.on_scalar(None, "t", 1.0, 1)
    err = capsys.readouterr().err
    assert err.count("plugin 'grumpy' failed in mosaic_on_heartbeat (host): KeyError") == 1
    assert err.count("mosaic_on_scalar") == 1
    assert {(r["hook"], r["count"]) for r in host.failure_records()} == {
        ("mosaic_on_heartbeat", 2),
        ("mosaic_on_scalar", 1),
    }


@pytest.mark.parametrize(
    "hook, call", [("mosaic_host_lost", "host_lost"), ("mosaic_scalars_reported", "scalars_reported")]
)
def test_a_training_process_hook_reaches_every_plugin_even_after_a_failure(hook, call):
    """mosaic_host_lost (the watchdog's) and mosaic_scalars_reported (a burst's end): a plugin that
    raises costs only itself."""
    seen = []
    host = host_with(
        module("a", **{hook: lambda child: 1 / 0}), module("b", **{hook: lambda child: seen.append(child)})
    )
    getattr(host, call)("ctx")
    assert seen == ["ctx"] and host.failures["a", hook].error.startswith("ZeroDivisionError")


def test_wrappers_and_ordering_marks_go_through_pluggy(run):
    def heartbeat_wrapper():
        results = yield
        return [*results, {"wrapped": len(results)}]

    wrapper = types.ModuleType("w")
    wrapper.mosaic_on_heartbeat = hookspecs.hookimpl(wrapper=True)(heartbeat_wrapper)
    order = []
    first = types.ModuleType("first")
    first.mosaic_run_started = hookspecs.hookimpl(tryfirst=True)(lambda: order.append("first"))
    plain = module("plain", mosaic_on_heartbeat=lambda: {"plain": 1}, mosaic_run_started=lambda: order.append("plain"))
    host = host_with(first, plain, wrapper)
    assert host.heartbeat_fields(run) == {"plain": 1, "wrapped": 1}
    host.run_started(run)
    assert order == ["first", "plain"]

    def failing_wrapper():
        yield
        raise RuntimeError("wrapper broke")

    bad = types.ModuleType("bad")
    bad.mosaic_on_heartbeat = hookspecs.hookimpl(wrapper=True)(failing_wrapper)
    host = host_with(plain, bad)
    assert host.heartbeat_fields(run) == {"plain": 1}  # a broken wrapper costs only itself
    assert "wrapper broke" in host.failures["bad", "mosaic_on_heartbeat"].error


def wrapper_module(name, hook, function, **options):
    mod = types.ModuleType(name)
    setattr(mod, hook, hookspecs.hookimpl(wrapper=True, **options)(function))
    return mod


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_raising_wrapper_of_mosaic_on_scalar_and_mosaic_on_frame_costs_only_its_plugin(when, capsys):
    seen = []

    def broken(child):
        if when == "before":
            raise RuntimeError("broken before yield")
        yield
        raise RuntimeError("broken after yield")

    fine = module(
        "fine",
        mosaic_on_scalar=lambda tag, value: seen.append((tag, value)),
        mosaic_on_frame=lambda frame: seen.append(("frame", frame)),
    )
    host = host_with(
        fine, wrapper_module("ws", "mosaic_on_scalar", broken), wrapper_module("wf", "mosaic_on_frame", broken)
    )
    assert not host.load_failures()
    for step in range(3):
        host.on_scalar(None, "charts/SPS", float(step), step)  # the run does not die
    host.on_frame(None, "pixels", None)
    assert seen == [("charts/SPS", 0.0), ("charts/SPS", 1.0), ("charts/SPS", 2.0), ("frame", "pixels")]
    assert host.failure_counts["ws", "mosaic_on_scalar"] == 3 and ("wf", "mosaic_on_frame") in host.failures
    assert capsys.readouterr().err.count("plugin 'ws' failed in mosaic_on_scalar") == 1


def test_a_raising_wrapper_of_a_stop_hook_names_its_plugin():
    def broken():
        yield
        raise RuntimeError("no")

    host = host_with(module("a", mosaic_build_args=lambda: ["--x"]), wrapper_module("w", "mosaic_build_args", broken))
    with pytest.raises(PluginError, match="plugin 'w' failed in mosaic_build_args: RuntimeError: no"):
        host.build_args(build_config({"run_id": "r", "algo": "a", "env_id": "e", "total_timesteps": 1}))


def test_results_are_credited_to_the_plugin_that_made_them_even_when_equal_or_identical(run):
    shared = {"same": 1}
    host = host_with(
        module("first", mosaic_on_heartbeat=lambda: shared), module("second", mosaic_on_heartbeat=lambda: shared)
    )
    assert host.heartbeat_fields(run) == {"same": 1}
    [failure] = host.failures.values()  # the one that came second (pluggy: last registered first)
    assert failure.plugin == "first" and "already contributed by 'second'" in failure.error

    def adds_a_section():
        results = yield
        return [{"from_wrapper": True}, *results]

    host = host_with(
        module("p", mosaic_build_manifest=lambda: shared), wrapper_module("w", "mosaic_build_manifest", adds_a_section)
    )
    assert host._call("mosaic_build_manifest", run=run, status="completed") == [
        ("w", {"from_wrapper": True}),
        ("p", shared),
    ]


def test_old_style_hookwrappers_are_guarded_and_see_plain_results(run):
    seen = []

    def replacing():
        outcome = yield
        seen.append(outcome.get_result())
        outcome.force_result([*outcome.get_result(), {"old": True}])

    def broken():
        yield
        raise RuntimeError("old wrapper broke")

    old = types.ModuleType("old")
    old.mosaic_on_heartbeat = hookspecs.hookimpl(hookwrapper=True)(replacing)
    bad = types.ModuleType("bad")
    bad.mosaic_on_heartbeat = hookspecs.hookimpl(hookwrapper=True)(broken)
    host = host_with(module("p", mosaic_on_heartbeat=lambda: {"p": 1}), old, bad)
    assert host.heartbeat_fields(run) == {"p": 1, "old": True} and seen == [[{"p": 1}]]
    assert host._call("mosaic_on_heartbeat", run=run) == [("p", {"p": 1}), ("old", {"old": True})]
    assert "old wrapper broke" in host.failures["bad", "mosaic_on_heartbeat"].error


def test_every_spec_carries_its_failure_policy():
    assert set(hookspecs.POLICY) == set(HOOK_NAMES) and set(hookspecs.POLICY.values()) == {"stop", "isolate"}
    for name in HOOK_NAMES:
        assert getattr(hookspecs, name).mosaic_policy == hookspecs.POLICY[name]
        assert f"Failure: {hookspecs.POLICY[name]}" in inspect.getdoc(getattr(hookspecs, name))
    with pytest.raises(ValueError, match="failure policy"):
        hookspecs.spec("maybe")


def test_call_monitoring_sees_every_hook_call(run):
    host = host_with(module("a", mosaic_on_heartbeat=lambda: {"z": 1}))
    seen = []
    host.pm.add_hookcall_monitoring(lambda name, impls, kwargs: seen.append(name), lambda *a: None)
    host.heartbeat_fields(run)
    host.on_scalar(None, "t", 1.0, 1)
    host.extras_keys()
    # the run's worker's run hooks are looked up once (mosaic_workers), then every call is seen
    assert seen == ["mosaic_workers", "mosaic_on_heartbeat", "mosaic_on_scalar", "mosaic_extras_keys"]


def test_trace_prints_each_call(run, capsys):
    host = PluginHost(trace=True)
    host.register_module(module("traced", mosaic_on_heartbeat=lambda: {"z": 1}), "traced")
    host.heartbeat_fields(run)
    err = capsys.readouterr().err
    assert "mosaic-trace: mosaic_on_heartbeat -> traced" in err and "{'z': 1}" in err


# ---------------------------------------------------------------------------------------------
# The real path: a third-party plugin distribution on PYTHONPATH, a real `mosaic run`.
RECORDER = """
import json, os
from pathlib import Path
from mosaic_core.hookspecs import hookimpl
from mosaic_core.cli.commands import CliCommand

def _log(run_dir, *item):
    with open(Path(run_dir) / "hooklog.jsonl", "a") as fh:
        fh.write(json.dumps([os.getpid(), *item], default=str) + "\\n")

@hookimpl
def mosaic_cli_commands():
    return [CliCommand("recorder-hello", "print hello", lambda p: p.add_argument("--who", default="world"),
                       lambda ns: print("hello " + ns.who) or 0)]

@hookimpl
def mosaic_validate_config(config):
    if config.extras.get("recorder_reject"):
        return ["extras.recorder_reject: rejected by the recorder plugin"]

@hookimpl
def mosaic_extras_keys():
    from mosaic_core.types import ExtrasKey
    return [ExtrasKey("recorder_seed"), ExtrasKey("recorder_reject")]

@hookimpl
def mosaic_child_events():
    from mosaic_core.types import ChildEvent
    return [ChildEvent("recorder_said")]

@hookimpl
def mosaic_config_defaults(data):
    return {"seed": 11} if data.get("extras", {}).get("recorder_seed") else None

@hookimpl
def mosaic_build_args(config):
    return ["--from-plugin", "7"]

@hookimpl
def mosaic_child_env(run):
    return {"RECORDER_SEES": run.run_id}

@hookimpl
def mosaic_run_started(run):
    _log(run.run_dir, "run_started")

@hookimpl
def mosaic_on_event(run, event):
    _log(run.run_dir, "on_event", event["event"], event["seq"])

@hookimpl
def mosaic_on_child_message(run, kind, payload):
    _log(run.run_dir, "on_child_message", kind, payload)

@hookimpl
def mosaic_on_heartbeat(run):
    return {"recorder": "alive"}

@hookimpl
def mosaic_build_manifest(run, status):
    return {"recorder": {"status": status}}

@hookimpl
def mosaic_run_finished(run, status):
    _log(run.run_dir, "run_finished", status)

@hookimpl
def mosaic_child_setup(child):
    _log(child.run_dir, "child_setup")

@hookimpl
def mosaic_env_make_kwargs(env_id, env_index):
    return {"max_episode_steps": 5}

@hookimpl
def mosaic_wrap_env(child, env, env_id, env_index):
    import gymnasium as gym
    class Tagged(gym.Wrapper):
        pass
    _log(child.run_dir, "wrap_env", env_id, env_index)
    return Tagged

@hookimpl
def mosaic_on_scalar(child, tag, value, step):
    _log(child.run_dir, "on_scalar", tag, value, step)
    child.publish("recorder", {"tag": tag})

@hookimpl
def mosaic_on_frame(child, frame, info):
    _log(child.run_dir, "on_frame", list(frame.shape), info.global_step)
"""

SCRIPT = """
import os, sys
from dataclasses import dataclass
import gymnasium as gym
import numpy as np
import tyro
from mosaic_core import child
from mosaic_core.child import FrameInfo

@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 10
    from_plugin: int = 0
    seed: int = 1

args = tyro.cli(Args)
assert os.environ["RECORDER_SEES"] and args.from_plugin == 7
env = gym.make(args.env_id, max_episode_steps=None)  # an explicit None is "not given"
assert type(env).__name__ == "Tagged", type(env)
env.reset(seed=0)
steps = 0
while True:
    steps += 1
    *_, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        break
assert steps <= 5  # max_episode_steps came from mosaic_env_make_kwargs
from tensorboardX import SummaryWriter
SummaryWriter("runs/x").add_scalar("charts/episodic_return", 12.5, 3)
child.plugins().on_frame(child.current(), np.zeros((4, 6, 3), np.uint8), FrameInfo(3, 0, 1.0, None, 10.0, 1))
child.emit_event("checkpoint_saved", {"path": "runs/x/model.cleanrl_model", "global_step": 3})
child.emit_event("recorder_said", {"hello": 1})
child.emit_event("undeclared_event", {"hello": 2})
import time; time.sleep(0.6)
"""


def test_every_hook_through_a_real_run(mosaic, workdir, runs_root, tmp_path):
    site = make_distribution(
        tmp_path / "site",
        "mosaic-recorder",
        {"mosaic.plugins": {"recorder": "recorder_plugin"}},
        {"recorder_plugin": RECORDER},
    )
    (workdir / "algo.py").write_text(SCRIPT)
    env = {"PYTHONPATH": str(site)}
    hello = mosaic("recorder-hello", "--who", "mosaic", env=env)
    assert hello.returncode == 0 and hello.stdout.strip() == "hello mosaic"
    rejected = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "algo.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--extras",
        '{"recorder_reject": true}',
        env=env,
    )
    assert rejected.returncode == 2 and "rejected by the recorder plugin" in rejected.stderr
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "algo.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--run-id",
        "hooks",
        "--heartbeat-interval",
        "0.2",
        "--extras",
        '{"recorder_seed": true}',
        env=env,
    )
    assert result.returncode == 0, result.stderr + (runs_root / "hooks/logs/cleanrl.stderr.log").read_text()
    events = result.events
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    beats = [e for e in events if e["event"] == "heartbeat"]
    assert beats and all(b["payload"]["recorder"] == "alive" for b in beats)
    assert any(e["event"] == "checkpoint_saved" and e["payload"]["global_step"] == 3 for e in events)
    assert any(e["event"] == "recorder_said" for e in events)  # declared through mosaic_child_events
    assert not any(e["event"] == "undeclared_event" for e in events)
    run_dir = runs_root / "hooks"
    assert json.loads((run_dir / "config.json").read_text())["seed"] == 11  # from mosaic_config_defaults
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["recorder"] == {"status": "completed"} and manifest["status"] == "completed"
    log = [json.loads(line) for line in (run_dir / "hooklog.jsonl").read_text().splitlines()]
    names = [entry[1] for entry in log]
    for hook in (
        "run_started",
        "on_event",
        "on_child_message",
        "run_finished",
        "child_setup",
        "wrap_env",
        "on_scalar",
        "on_frame",
    ):
        assert hook in names, f"{hook} was never called"
    host_pid = next(e[0] for e in log if e[1] == "run_started")
    child_pid = next(e[0] for e in log if e[1] == "child_setup")
    assert host_pid != child_pid  # host hooks on the host, training hooks in the training process
    assert ["on_scalar", "charts/episodic_return", 12.5, 3] in [e[1:] for e in log]
    assert ["on_child_message", "recorder", {"tag": "charts/episodic_return"}] in [e[1:] for e in log]
    assert ["on_frame", [4, 6, 3], 3] in [e[1:] for e in log]
    assert names.index("run_finished") < len(names) - 1 and log[-1][1:3] == ["on_event", "run_completed"]


TB_SCRIPT = """
from torch.utils.tensorboard import SummaryWriter
from tensorboardX import SummaryWriter as XWriter
SummaryWriter("runs/CartPole-v1__x__1__1").add_scalar("charts/SPS", 1.0, 1)
XWriter(logdir="runs/tbx").add_scalar("charts/SPS", 2.0, 1)
"""


def test_tensorboard_dir_relocates_the_scripts_writers(mosaic, workdir, runs_root):
    (workdir / "tb.py").write_text(TB_SCRIPT)
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "tb.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1",
        "--run-id",
        "tbdir",
        "--extras",
        '{"tensorboard_dir": "board"}',
    )
    assert result.returncode == 0, result.stderr
    run_dir = runs_root / "tbdir"
    assert list((run_dir / "board" / "CartPole-v1__x__1__1").glob("events.out.tfevents.*"))
    assert list((run_dir / "board" / "tbx").glob("events.out.tfevents.*"))
    assert not (run_dir / "runs").exists()
    outside = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "tb.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1",
        "--extras",
        '{"tensorboard_dir": "../../etc"}',
    )
    assert outside.returncode == 2 and "tensorboard_dir" in outside.stderr


def test_mosaic_frame_wanted_is_any_of_its_answers_and_a_raising_one_costs_only_itself(capsys):
    """``frame_wanted``: True from one implementation is enough; a raising implementation is
    isolated (named once) and the others still answer."""

    def broken(child, env_index):
        raise RuntimeError("no clock")

    nobody = host_with(module("never", mosaic_frame_wanted=lambda child, env_index: None))
    assert nobody.frame_wanted("ctx", 0) is False
    host = host_with(
        module("never", mosaic_frame_wanted=lambda child, env_index: False),
        module("odd", mosaic_frame_wanted=lambda child, env_index: env_index % 2 == 1),
        module("broken", mosaic_frame_wanted=broken),
    )
    assert [host.frame_wanted("ctx", i) for i in range(3)] == [False, True, False]
    assert [(f.plugin, f.hook) for f in host.failures.values()] == [("broken", "mosaic_frame_wanted")]
    assert capsys.readouterr().err.count("no clock") == 1


def test_the_public_frame_wanted_asks_the_plugins_at_most_every_50_ms_per_env_while_they_say_no(monkeypatch):
    """``mosaic_core.child.frame_wanted`` is cheap enough for every env after every step: a "no"
    holds :data:`FRAME_CHECK_S` for that env; a "yes" is asked again each time."""
    import time

    from mosaic_core import _patchpoints, child

    asked, answer = [], {"yes": False}
    host = host_with(
        module("counted", mosaic_frame_wanted=lambda child, env_index: asked.append(env_index) or answer["yes"])
    )
    monkeypatch.setattr(_patchpoints, "ready", lambda: ("ctx", host))
    monkeypatch.setattr(child, "_frames_refused_until", {})
    assert not any(child.frame_wanted(0) for _ in range(100))
    assert child.frame_wanted(1) is False
    assert asked == [0, 1]
    answer["yes"] = True
    time.sleep(child.FRAME_CHECK_S)
    assert child.frame_wanted(0) and child.frame_wanted(0)
    assert asked == [0, 1, 0, 0]


# ---------------------------------------------------------------------------------------------
# What plugins provide: descriptors from hooks, checked in one place; a worker's own run hooks.
def _metadata(name, run_hooks=None):
    from mosaic_core import WorkerCapabilities, WorkerMetadata

    caps = WorkerCapabilities(
        supported_paradigms=("sequential",),
        env_families=("gymnasium",),
        action_spaces=("discrete",),
        observation_spaces=("vector",),
    )
    return WorkerMetadata(name=name, version="1", description="d", capabilities=caps, worker="m:W", run_hooks=run_hooks)


def test_mosaic_workers_descriptors_are_checked_in_one_place_naming_the_plugin():
    from mosaic_core.workers import discover_workers

    host = host_with(
        module("good", mosaic_workers=lambda: [_metadata("alpha")]),
        module("wrong", mosaic_workers=lambda: [{"name": "beta"}]),
        module("copy", mosaic_workers=lambda: [_metadata("alpha")]),
        module("boom", mosaic_workers=lambda: 1 / 0),
    )
    mine = {(i.plugin, i.name): i for i in discover_workers(host) if i.distribution == "(in-process)"}
    assert mine[("good", "alpha")].status == "active" or mine[("copy", "alpha")].status == "active"
    failed = {key: item.error for key, item in mine.items() if item.status == "failed"}
    assert failed.pop(("wrong", "wrong")) == (
        "entry point 'wrong' (wrong) from (in-process) : mosaic_workers returned {'name': 'beta'}; expected WorkerMetadata"
    )
    assert "ZeroDivisionError" in failed.pop(("boom", "boom"))
    [duplicate] = failed.values()
    assert duplicate.startswith("duplicate name 'alpha': provided by (in-process) (")


def test_mosaic_launchers_provide_launcher_descriptors():
    from mosaic_core.descriptors import collect
    from mosaic_core.launchers import Launcher

    class K8s(Launcher):
        name, description = "k8s", "a Job per run"

        def execute(self, job):
            return 0

    info = K8s()
    host = host_with(module("kube", mosaic_launchers=lambda: [info]), module("bad", mosaic_launchers=lambda: "x"))
    items = {i.name: i for i in collect(host, "mosaic_launchers", Launcher)}
    assert items["k8s"].obj is info and items["k8s"].plugin == "kube"
    assert items["bad"].status == "failed" and "expected a list of Launcher" in items["bad"].error


def test_mosaic_hookspecs_declares_a_hook_others_implement_even_when_registered_first(tmp_path, monkeypatch):
    (tmp_path / "declared_specs.py").write_text(
        "from mosaic_core import ISOLATE, hookspec\n\n@hookspec(ISOLATE)\ndef mosaic_shout(word):\n"
        "    '''Called to shout. Return None. Failure: isolate.'''\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import declared_specs

    early = module("early", mosaic_shout=lambda word: word.upper())
    typo = module("typo", mosaic_shuot=lambda word: word)
    optional = types.ModuleType("optional")
    optional.mosaic_absent = hookspecs.hookimpl(optionalhook=True)(lambda: None)
    host = PluginHost(
        [
            _entry(early),
            _entry(typo),
            _entry(optional),
            _entry(module("owner", mosaic_hookspecs=lambda: [declared_specs])),
        ],
        trace=False,
    )
    status = {i.name: (i.status, i.error) for i in host.loaded}
    assert status["early"] == ("active", None) and status["owner"] == ("active", None)
    assert status["optional"] == ("active", None)  # a hook of a plugin that is not installed: optionalhook
    assert status["typo"][0] == "failed" and "mosaic_shuot" in status["typo"][1]
    assert [value for _plugin, value in host._call("mosaic_shout", word="hey")] == ["HEY"]
    assert host.pm.policy["mosaic_shout"] == "isolate"


def _entry(mod):
    from mosaic_core.entrypoints import LoadedEntryPoint

    return LoadedEntryPoint(mod.__name__, "mosaic.plugins", mod.__name__, "(in-process)", "", obj=mod)


def test_a_worker_s_run_hooks_are_called_for_its_own_runs_only(tmp_path, monkeypatch):
    for name in ("alpha", "beta"):
        (tmp_path / f"{name}_hooks.py").write_text(
            "from mosaic_core import hookimpl\n\n@hookimpl\ndef mosaic_on_heartbeat(run):\n"
            f"    return {{'{name}': run.run_id}}\n"
        )
    (tmp_path / "gamma_hooks.py").write_text(
        "from mosaic_core import hookimpl\n\n@hookimpl\ndef mosaic_extras_keys():\n    return []\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    workers = [_metadata(n, f"{n}_hooks") for n in ("alpha", "beta", "gamma")] + [_metadata("delta", "alpha_hooks")]
    host = host_with(module("everyone", mosaic_on_heartbeat=lambda: {"all": 1}, mosaic_workers=lambda: workers))
    config = build_config({"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 10})

    def run_of(worker):
        return RunContext(config, RunDirectory(tmp_path, "r1"), worker)

    assert host.heartbeat_fields(run_of("alpha")) == {"all": 1, "alpha": "r1"}
    assert host.heartbeat_fields(run_of("beta")) == {"all": 1, "beta": "r1"}
    assert host.heartbeat_fields(run_of("alpha")) == {"all": 1, "alpha": "r1"}  # beta's stay out
    assert host.heartbeat_fields(run_of("other")) == {"all": 1}
    assert host.heartbeat_fields(run_of("delta")) == {"all": 1, "alpha": "r1"}  # alpha's module, its own copy
    assert host.heartbeat_fields(run_of("alpha")) == {"all": 1, "alpha": "r1"}
    assert host.hooks_of("worker:alpha") == ["mosaic_on_heartbeat"]
    with pytest.raises(PluginError, match="worker 'gamma'.*gamma_hooks.*mosaic_extras_keys"):
        host.heartbeat_fields(run_of("gamma"))  # a run hook that is not one of a run's
    with pytest.raises(PluginError, match="worker 'gamma'"):
        host.heartbeat_fields(run_of("gamma"))  # asked again, it says so again
