"""The host CLI's start-up path imports nothing heavy (checked in a fresh interpreter), reads
installed metadata once (then from its cache) and loads no plugin for a built-in command that
needs no descriptor (``mosaic workers`` and the commands with launcher flags ask the plugins'
``mosaic_workers`` / ``mosaic_launchers``: light modules, no heavy import)."""

import json
import os
import subprocess
import sys

import pytest

from tests.core.distributions import make_distribution

HEAVY = ("torch", "gymnasium", "tensorboard", "wandb", "matplotlib", "grpc", "tensorboardX", "pettingzoo")
# What start-up no longer pays for: importlib.metadata (and the email parser it brings) once the
# entry points are cached; pluggy and every plugin module for a built-in command.
METADATA = ("importlib.metadata", "email.message")
PLUGINS = (
    "pluggy",
    "mosaic_core.plugins",
    "mosaic_analytics.plugin",
    "mosaic_curriculum.plugin",
    "mosaic_fastlane.plugin",
    "cleanrl_worker.plugin",
    "mosaic_arena.plugin",
)

PROBE = """
import sys
from mosaic_core.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
found = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY:" + ",".join(found), file=sys.stderr)
"""


def imported(argv, modules, env=None, cwd=None):
    """Which of ``modules`` ``mosaic ARGV`` imported, in a fresh interpreter."""
    code = PROBE.format(argv=argv, heavy=modules)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    line = [l for l in result.stderr.splitlines() if l.startswith("HEAVY:")][-1]
    return line[6:]


@pytest.mark.parametrize("argv", [["workers"], ["--help"], ["plugins"], ["workers", "--json"], ["match", "--help"]])
def test_no_heavy_import(argv):
    assert imported(argv, HEAVY) == "", f"{argv} imported heavy modules"


@pytest.mark.parametrize("argv", [["--help"], ["plugins"], ["workers", "--json"], ["submit", "--help"]])
def test_cached_entry_points_need_no_importlib_metadata(argv, tmp_path):
    env = {"MOSAIC_VENVS": str(tmp_path / "venvs")}  # no worker environment to check
    imported(argv, METADATA, env, cwd=tmp_path)  # the first start in this folder may scan and write the cache
    assert imported(argv, METADATA, env, cwd=tmp_path) == "", f"{argv} read installed metadata again"


@pytest.mark.parametrize("argv", [["plugins", "--help"], ["cancel", "--help"]])
def test_built_in_commands_load_no_plugin(argv, tmp_path):
    assert imported(argv, PLUGINS, {"MOSAIC_VENVS": str(tmp_path / "venvs")}) == "", f"{argv} loaded plugins"


def test_help_still_lists_every_plugins_command(mosaic):
    result = mosaic("--help")
    assert result.returncode == 0
    for command in ("workers", "plugins", "daemon", "submit", "cancel", "algos", "enjoy", "sweep", "fastlane"):
        assert f"    {command} " in result.stdout, command


def test_an_installed_changed_or_removed_distribution_is_seen_at_once(mosaic, tmp_path):
    """The cache of entry points follows what is installed: a new distribution, an entry point
    added in place (an egg-info rewritten by ``pip install -e``), a distribution removed."""
    site = tmp_path / "site"
    env = {"PYTHONPATH": str(site)}
    metadata = {"mosaic.plugins": {"first": "mosaic_core.host_plugin"}}
    make_distribution(site, "cache-probe", metadata, {})

    def names():
        result = mosaic("plugins", "--json", env=env)
        assert result.returncode == 0, result.stderr
        return {p["name"]: p["distribution"] for p in json.loads(result.stdout)}

    assert names()["first"] == "cache-probe"
    assert names()["first"] == "cache-probe"  # from the cache
    points = site / "cache_probe-1.0.dist-info" / "entry_points.txt"
    points.write_text(points.read_text() + "second = mosaic_core.host_plugin\n")
    assert {"first", "second"} <= set(names())
    make_distribution(site, "cache-probe-two", {"mosaic.plugins": {"third": "mosaic_core.host_plugin"}}, {})
    assert names()["third"] == "cache-probe-two"
    for path in sorted((site / "cache_probe-1.0.dist-info").iterdir()):
        path.unlink()
    (site / "cache_probe-1.0.dist-info").rmdir()
    assert "first" not in names() and "third" in names()


def test_a_cache_file_of_other_text_is_ignored(mosaic, tmp_path):
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    assert mosaic("workers", "--json", env=env).returncode == 0
    (written,) = (cache / "mosaic" / "entry-points").iterdir()
    written.write_text('{"stamp": 1, "groups": {"mosaic.plugins": [["x", "os:system", "evil", "1"]]}}')
    result = mosaic("workers", "--json", env=env)
    assert result.returncode == 0 and "evil" not in result.stdout
    written.write_text("not json")
    assert mosaic("workers", "--json", env=env).returncode == 0


def test_discovery_alone_is_light():
    code = (
        "import sys\nfrom mosaic_core.workers import discover_workers\nfrom mosaic_core.plugins import load_plugin_host\n"
        "discover_workers(); load_plugin_host()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_slow_step_says_what_it_is_doing_at_a_terminal_and_a_quick_one_says_nothing():
    import pty

    code = (
        "import time\nfrom mosaic_core.cli.console import said_if_slow\n"
        "with said_if_slow('checking the quick thing', after=5):\n    pass\n"
        "with said_if_slow('starting the slow thing', after=0.05):\n    time.sleep(1.0)\n"
    )
    leader, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-c", code], stderr=terminal, timeout=60)
        os.close(terminal)
        said = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0 and said.decode() == "mosaic: starting the slow thing…\r\n", said
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and piped.stderr == ""  # a script's or a test's stderr: one line stays one


@pytest.mark.parametrize("argv", [["--help"], ["workers"], ["workers", "--json"]])
def test_help_and_workers_list_from_their_cache_and_load_no_plugin(argv, tmp_path):
    env = {"MOSAIC_VENVS": str(tmp_path / "venvs"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    modules = (*PLUGINS, "mosaic_core.runstore", "mosaic_core.workers", "grpc", "rich")  # the table drawn once
    imported(argv, modules, env, cwd=tmp_path)  # the first start loads the plugins and keeps what it lists
    assert imported(argv, modules, env, cwd=tmp_path) == "", f"{argv} loaded plugins again"


def test_workers_from_the_cache_are_the_workers_discovered(mosaic, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    listed = [mosaic("workers", "--json", env=env) for _ in range(2)]
    assert [r.returncode for r in listed] == [0, 0], listed[0].stderr
    assert (tmp_path / "cache" / "mosaic" / "workers").is_dir()
    assert json.loads(listed[1].stdout) == json.loads(listed[0].stdout)
    assert {w["name"] for w in json.loads(listed[1].stdout)} >= {"cleanrl", "rllib", "xuance"}


def test_the_workers_table_is_drawn_again_for_another_terminal_or_content(mosaic, tmp_path):
    """The drawn table comes from the cache only for the same cells and terminal: another width
    (``$COLUMNS`` for a pipe) draws it again; a damaged cache file is drawn over."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "MOSAIC_VENVS": str(tmp_path / "venvs")}
    wide, again = (mosaic("workers", env={**env, "COLUMNS": "200"}) for _ in range(2))
    narrow = mosaic("workers", env={**env, "COLUMNS": "100"})
    assert wide.returncode == again.returncode == narrow.returncode == 0, wide.stderr
    assert again.stdout == wide.stdout and "MOSAIC workers" in wide.stdout
    assert max(map(len, wide.stdout.splitlines())) > 100 >= max(map(len, narrow.stdout.splitlines()))
    for drawn in (tmp_path / "cache" / "mosaic" / "tables").iterdir():
        drawn.write_text('{"format": 1, "key": ')
    assert mosaic("workers", env={**env, "COLUMNS": "200"}).stdout == wide.stdout


PROBE_PLUGIN = """
import pluggy
from mosaic_core.cli.commands import CliCommand
hookimpl = pluggy.HookimplMarker("mosaic")

@hookimpl
def mosaic_cli_commands():
    return [CliCommand("probe-cmd", {help!r}, lambda parser: None, lambda ns: 0)]
"""


def test_the_help_cache_follows_an_edited_or_removed_plugin(mosaic, tmp_path):
    """An editable plugin's help line edited in place, then its distribution removed: ``--help``
    says so at once; a cache file of other text is not used."""
    site = tmp_path / "site"
    env = {"PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    make_distribution(
        site, "help-probe", {"mosaic.plugins": {"probe": "help_probe"}}, {"help_probe": PROBE_PLUGIN.format(help="one")}
    )

    def listed():
        result = mosaic("--help", env=env)
        assert result.returncode == 0, result.stderr
        return [line.split()[1:] for line in result.stdout.splitlines() if line.split()[:1] == ["probe-cmd"]]

    assert listed() == [["one"]]
    assert listed() == [["one"]]  # from the cache
    (site / "help_probe.py").write_text(PROBE_PLUGIN.format(help="two words"))
    assert listed() == [["two", "words"]]
    (cached,) = (tmp_path / "cache" / "mosaic" / "cli-commands").iterdir()
    cached.write_text('{"format": 1, "stamp": "x", "files": 3, "commands": [["evil", "x"]]}')
    assert listed() == [["two", "words"]]
    for path in sorted((site / "help_probe-1.0.dist-info").iterdir()):
        path.unlink()
    (site / "help_probe-1.0.dist-info").rmdir()
    assert listed() == []
