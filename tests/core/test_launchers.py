"""The launcher seam (mosaic_core/launchers.py): discovery through the installed entry point,
options as flags and variables, the worker's own flags kept for a run elsewhere, and no
launcher dependency imported unless a run uses it. Needs no Ray."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from mosaic_core import launchers
from mosaic_core.errors import UsageError


def test_the_installed_ray_launcher_is_discovered_with_its_options():
    found = {item.name: item for item in launchers.discover()}
    assert found["ray"].status == "active" and found["ray"].distribution == "mosaic-workers"
    info = found["ray"].obj
    assert {"--ray-address", "--ray-num-cpus", "--num-gpus", "--ray-resources"} <= {o.flag for o in info.options}
    assert info.selected({"ray_address": "127.0.0.1:6379"}) and not info.selected({"ray_address": None})


def test_options_come_from_flags_or_their_variables_and_are_exported(monkeypatch):
    info = launchers.LauncherInfo("fake", "a test launcher", (
        launchers.LauncherOption("--fake-where", "MOSAIC_FAKE_WHERE", "where", selects=True),
        launchers.LauncherOption("--fake-shared", "MOSAIC_FAKE_SHARED", "shared", switch=True)), "nowhere:execute")
    monkeypatch.setenv("MOSAIC_FAKE_WHERE", "from-env")
    parser = argparse.ArgumentParser()
    launchers.add_arguments(parser, [info])
    ns = parser.parse_args([])
    assert launchers.choose(launchers.settings_of(ns, [info]), [info]) is info  # the variable selects it
    ns = parser.parse_args(["--fake-where", "there", "--fake-shared"])
    monkeypatch.delenv("MOSAIC_FAKE_WHERE")
    assert launchers.export_settings(ns, [info]) is info
    import os

    assert os.environ["MOSAIC_FAKE_WHERE"] == "there" and os.environ["MOSAIC_FAKE_SHARED"] == "1"
    monkeypatch.delenv("MOSAIC_FAKE_WHERE")
    monkeypatch.delenv("MOSAIC_FAKE_SHARED")
    other = launchers.LauncherInfo("other", "x", (launchers.LauncherOption("--other-at", "MOSAIC_OTHER_AT", "at",
                                                                          selects=True),), "nowhere:execute")
    with pytest.raises(UsageError, match="pick one"):
        launchers.choose({"fake_where": "a", "other_at": "b"}, [info, other])


@pytest.mark.parametrize("bad", [dict(flag="-x", env="MOSAIC_X"), dict(flag="--x", env="lower")])
def test_a_malformed_option_is_refused_at_construction(bad):
    with pytest.raises(ValueError):
        launchers.LauncherOption(help="h", **bad)


def test_strip_options_keeps_only_the_worker_flags():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs-dir")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--log-every", type=int)
    argv = ["--runs-dir", "r", "--log-every", "5", "--json", "--runs-dir=x"]
    assert launchers.strip_options(argv, parser, {"runs_dir", "json"}) == ["--log-every", "5"]


def test_a_dry_run_with_a_launcher_imports_nothing_of_it(tmp_path):
    code = ("import sys; from mosaic_core.pipeline import main; "
            "rc = main('example', ['--env-id', 'CartPole-v1', '--total-timesteps', '100', '--dry-run', "
            "'--ray-address', '127.0.0.1:1']); "
            "assert rc == 0; assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')]")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_an_unreachable_cluster_is_one_line_and_leaves_no_run_directory(mosaic, workdir):
    done = mosaic("run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "100",
                  "--ray-address", "127.0.0.1:1")
    assert done.returncode == 2
    assert [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")] == [
        "mosaic: error: Ray cluster at 127.0.0.1:1 does not answer: Connection refused "
        "(is `ray start --head` running there?)"]
    runs = workdir / "var" / "trainer" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def _begin(settings, num_cpus):
    return ("begun", settings["fake_where"], num_cpus)


def test_start_early_is_the_chosen_launchers_and_none_otherwise():
    option = launchers.LauncherOption("--fake-where", "MOSAIC_FAKE_WHERE", "where", selects=True)
    early = launchers.LauncherInfo("fake", "x", (option,), "nowhere:execute",
                                   start_early="tests.core.test_launchers:_begin")
    plain = launchers.LauncherInfo("fake", "x", (option,), "nowhere:execute")
    assert launchers.start_early({"fake_where": "there"}, [early], 2) == ("begun", "there", 2)
    assert launchers.start_early({"fake_where": None}, [early], 2) is None  # the local launcher
    assert launchers.start_early({"fake_where": "there"}, [plain], 2) is None
    with pytest.raises(ValueError, match="start_early"):
        launchers.LauncherInfo("fake", "x", (option,), "nowhere:execute", start_early="no-colon")
