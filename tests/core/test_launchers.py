"""The launcher seam (mosaic_core/launchers.py): discovery through the installed entry point,
a launcher's signatures checked there (a broken one: one line naming its plugin), options as
flags and variables, the worker's own flags kept for a run elsewhere, and no launcher
dependency imported unless a run uses it. Needs no Ray. (What every launcher does with a run:
tests/launchers/, the LauncherContractSuite.)"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from mosaic_core import launchers
from mosaic_core.errors import UsageError
from mosaic_core.testing.launcher_suite import LauncherContractSuite
from tests.core.distributions import make_distribution


class TestLocalLauncherContract(LauncherContractSuite):
    """The built-in launcher meets the contract every launcher's suite subclasses."""

    launcher = "local"
    bad_options = [(("--ray-address", "127.0.0.1:1"), "--launcher local was chosen but --ray-address")]


class Fake(launchers.Launcher):
    """A launcher for the seam's own tests: options only (nothing is executed)."""

    def __init__(self, name: str, options: tuple[launchers.LauncherOption, ...]):
        self.name, self.description, self.options = name, "a test launcher", options

    def execute(self, job):
        raise AssertionError("the seam's tests execute nothing")


def test_the_installed_ray_launcher_is_discovered_with_its_options():
    found = {item.name: item for item in launchers.discover()}
    assert found["ray"].status == "active" and found["ray"].distribution == "mosaic-rl"
    info = found["ray"].obj
    assert {"--ray-address", "--ray-num-cpus", "--ray-resources"} <= {o.flag for o in info.options}
    assert found["slurm"].status == "active"  # both launchers installed, no flag declared twice
    assert info.selected({"ray_address": "127.0.0.1:6379"}) and not info.selected({"ray_address": None})


def _fake_launchers():
    info = Fake(
        "fake",
        (
            launchers.LauncherOption("--fake-where", "MOSAIC_FAKE_WHERE", "where", selects=True),
            launchers.LauncherOption("--fake-shared", "MOSAIC_FAKE_SHARED", "shared", switch=True),
        ),
    )
    other = Fake("other", (launchers.LauncherOption("--other-at", "MOSAIC_OTHER_AT", "at"),))
    parser = argparse.ArgumentParser()
    launchers.add_arguments(parser, [info, other])
    return info, other, parser


def test_a_launcher_is_chosen_by_name_or_by_a_selecting_option(monkeypatch):
    monkeypatch.setenv("MOSAIC_FAKE_WHERE", "from-env")
    info, other, parser = _fake_launchers()
    assert launchers.select(parser.parse_args([]), [info, other]).launcher is info  # the variable selects it
    choice = launchers.select(parser.parse_args(["--launcher", "other", "--other-at", "b"]), [info, other])
    assert choice.name == "other" and choice.settings["other_at"] == "b"  # fake's variable is only a default
    assert launchers.select(parser.parse_args(["--launcher", "local"]), [info, other]).local


def test_a_choice_passes_on_as_explicit_flags_and_never_through_the_environment(monkeypatch):
    monkeypatch.delenv("MOSAIC_FAKE_WHERE", raising=False)
    info, other, parser = _fake_launchers()
    choice = launchers.select(
        parser.parse_args(["--fake-where", "there", "--fake-shared", "--num-gpus", "1"]), [info, other]
    )
    assert choice.argv() == ["--launcher", "fake", "--num-gpus", "1", "--fake-where", "there", "--fake-shared"]
    import os

    assert "MOSAIC_FAKE_WHERE" not in os.environ and "MOSAIC_FAKE_SHARED" not in os.environ
    again = launchers.select(parser.parse_args(choice.argv()), [info, other])
    assert again == choice


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--launcher", "nowhere"], "--launcher 'nowhere': no such launcher (installed: local, fake, other)"),
        (["--launcher", "other", "--fake-where", "x"], "--launcher other was chosen but --fake-where"),
        (["--launcher", "local", "--other-at", "x"], "--launcher local was chosen but --other-at"),
        (["--fake-where", ""], "--fake-where is empty"),
    ],
)
def test_a_bad_choice_is_one_usage_error(monkeypatch, argv, message):
    monkeypatch.delenv("MOSAIC_FAKE_WHERE", raising=False)
    info, other, parser = _fake_launchers()
    with pytest.raises(UsageError) as caught:
        launchers.select(parser.parse_args(argv), [info, other])
    assert str(caught.value).startswith(message)


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
    code = (
        "import sys; from mosaic_core.pipeline import main; "
        "rc = main('example', ['--env-id', 'CartPole-v1', '--total-timesteps', '100', '--dry-run', "
        "'--ray-address', '127.0.0.1:1']); "
        "assert rc == 0; assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')]"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_an_unreachable_cluster_is_one_line_and_leaves_no_run_directory(mosaic, workdir):
    done = mosaic(
        "run",
        "--worker",
        "example",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "100",
        "--ray-address",
        "127.0.0.1:1",
    )
    assert done.returncode == 2
    assert [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")] == [
        "mosaic: error: Ray cluster at 127.0.0.1:1 does not answer: Connection refused "
        "(is `ray start --head` running there?)"
    ]
    runs = workdir / "var" / "trainer" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


class Early(Fake):
    def start_early(self, settings, num_cpus):
        return ("begun", settings["fake_where"], num_cpus)


def test_start_early_is_the_chosen_launchers_and_none_otherwise():
    option = launchers.LauncherOption("--fake-where", "MOSAIC_FAKE_WHERE", "where", selects=True)
    early, plain = Early("fake", (option,)), Fake("fake", (option,))
    choice = launchers.LauncherChoice("fake", early, {"fake_where": "there"})
    assert launchers.start_early(choice, 2) == ("begun", "there", 2)
    assert launchers.start_early(launchers.LauncherChoice(), 2) is None  # the local launcher
    assert launchers.start_early(launchers.LauncherChoice("fake", plain, {"fake_where": "there"}), 2) is None
    assert launchers.capacity(choice) is None and not launchers.can_launch_many(choice)


class TakesTooMuch(Fake):
    def validate(self, settings, num_cpus, cluster):  # a third argument the host never passes
        return []


class Unnamed(Fake):
    def __init__(self):
        super().__init__("local", ())


class NoExecute(launchers.Launcher):
    name = "noexec"


@pytest.mark.parametrize(
    "launcher, message",
    [
        (TakesTooMuch("fake", ()), "launcher 'fake': validate must take (settings, num_cpus), its signature is"),
        (Unnamed(), "launcher name 'local' must be lower-case"),
        (NoExecute(), "launcher 'noexec' has no execute(job)"),
        (Fake("fake", ("--x",)), "launcher 'fake': options must be a tuple of LauncherOption"),
    ],
)
def test_a_launcher_is_checked_when_registered(launcher, message):
    with pytest.raises(ValueError) as caught:
        launchers.check(launcher)
    assert str(caught.value).startswith(message)


BROKEN = """
from mosaic_core import hookimpl
from mosaic_core.launchers import Launcher

class Kube(Launcher):
    name, description = "kube", "a Kubernetes Job per run"

    def execute(self):  # forgot the job
        return 0

@hookimpl
def mosaic_launchers():
    return [Kube()]
"""


def test_a_broken_launcher_is_one_line_naming_its_plugin_and_exit_2(mosaic, tmp_path, workdir):
    site = tmp_path / "site"
    make_distribution(site, "mosaic-kube", {"mosaic.plugins": {"kube": "kube_plugin"}}, {"kube_plugin": BROKEN})
    done = mosaic(
        "run", "--worker", "example", "--env-id", "CartPole-v1", "--launcher", "kube", env={"PYTHONPATH": str(site)}
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("mosaic: error: --launcher 'kube' is broken: entry point 'kube'"), lines
    assert "mosaic-kube" in lines[0] and "execute must take (job)" in lines[0], lines
    runs = workdir / "var" / "trainer" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_an_unreachable_cluster_and_an_unchosen_worker_are_both_reported(mosaic, workdir):
    done = mosaic(
        "run",
        "--algo",
        "no-such-algo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "100",
        "--launcher",
        "ray",
        "--ray-address",
        "127.0.0.1:1",
        env={"MOSAIC_DEFAULT_WORKER": ""},
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")]
    assert len(lines) == 1 and "Ray cluster at 127.0.0.1:1 does not answer" in lines[0], done.stderr
    assert "worker" in lines[0].split("and: Ray cluster")[0], done.stderr
