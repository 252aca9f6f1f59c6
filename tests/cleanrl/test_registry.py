"""Algorithm resolution: every source, the documented order, errors, and ``mosaic algos``.

Plugins are real: the installed example package, and tiny distributions written to a folder put
on sys.path (importlib.metadata finds them exactly as it finds pip-installed ones), whose
``mosaic.plugins`` module implements the CleanRL worker's ``mosaic_cleanrl_algorithms`` hook.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanrl_worker import registry
from cleanrl_worker.registry import RESOLUTION_ORDER, list_algorithms, resolve
from mosaic_core.errors import UsageError
from mosaic_core.plugins import plugin_host
from tests.core.distributions import make_distribution

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "cleanrl_checkout"
SCRIPT = "import tyro\nfrom dataclasses import dataclass\n\n@dataclass\nclass Args:\n    env_id: str = 'x'\n"


@pytest.fixture(autouse=True)
def no_home(monkeypatch):
    monkeypatch.delenv(registry.HOME_VAR, raising=False)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for tiny installed distributions (the process's plugin host is
    loaded again after the test: it saw them)."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    yield path
    plugin_host.cache_clear()


def add_algorithms(site: Path, dist: str, algorithms: dict[str, str], modules: dict[str, str] | None = None) -> None:
    """A distribution whose plugin adds ``algorithms`` through ``mosaic_cleanrl_algorithms``."""
    plugin = f"{dist.replace('-', '_')}_plugin"
    source = (
        "from mosaic_core import hookimpl\n\n@hookimpl(optionalhook=True)\n"
        f"def mosaic_cleanrl_algorithms():\n    return {algorithms!r}\n"
    )
    make_distribution(site, dist, {"mosaic.plugins": {dist: plugin}}, {plugin: source, **(modules or {})})
    plugin_host.cache_clear()  # the process's plugin host sees it


def make_checkout(root: Path, *names: str) -> Path:
    for name in names:
        script = root / "cleanrl" / f"{name}.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(SCRIPT)
    (root / "cleanrl_utils").mkdir(parents=True, exist_ok=True)
    return root


def error_of(*args, **kwargs) -> str:
    with pytest.raises(UsageError) as info:
        resolve(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    return message


# ---------------------------------------------------------------------------- order
def test_resolution_order_is_documented_and_exposed():
    assert RESOLUTION_ORDER == ("script", "plugin", "checkout", "installed", "bundled")
    doc = registry.__doc__
    positions = [doc.index(f"``{source}``") for source in RESOLUTION_ORDER]
    assert positions == sorted(positions)


def test_each_source_wins_over_the_ones_after_it(tmp_path, site, monkeypatch):
    """One name, ``ppo``, available from every source at once: peel them off one by one."""
    home = make_checkout(tmp_path / "home", "ppo")
    make_checkout(tmp_path / "installed", "ppo")
    monkeypatch.syspath_prepend(str(tmp_path / "installed"))  # an importable `cleanrl` package
    add_algorithms(site, "ppo-override", {"ppo": "override_ppo"}, {"override_ppo": SCRIPT})
    (tmp_path / "ppo.py").write_text(SCRIPT)

    assert resolve("./ppo.py", cleanrl_home=home, cwd=tmp_path).source == "script"
    assert resolve("ppo", cleanrl_home=home, cwd=tmp_path).source == "plugin"
    entry = next(e for e in list_algorithms(home, cwd=tmp_path) if e.name == "ppo")
    assert [s.source for s in entry.sources][:3] == ["plugin", "checkout", "installed"]
    assert entry.winner.source == "plugin"

    (site / "ppo_override-1.0.dist-info" / "entry_points.txt").unlink()
    plugin_host.cache_clear()
    assert resolve("ppo", cleanrl_home=home, cwd=tmp_path).source == "checkout"
    found = resolve("ppo", cwd=tmp_path)
    assert found.source == "installed" and found.checkout_root == (tmp_path / "installed").resolve()
    if "ppo" in registry.bundled_names():
        assert [s.source for s in next(e for e in list_algorithms(home) if e.name == "ppo").sources] == [
            "checkout",
            "installed",
            "bundled",
        ]


# ---------------------------------------------------------------------------- script paths
def test_script_path_resolves_against_cwd(tmp_path):
    (tmp_path / "algos").mkdir()
    (tmp_path / "algos" / "mine.py").write_text(SCRIPT)
    found = resolve("algos/mine.py", cwd=tmp_path)
    assert (found.name, found.source, found.checkout_root) == ("mine", "script", None)
    assert found.script == (tmp_path / "algos" / "mine.py").resolve()


def test_script_inside_a_checkout_puts_the_checkout_root_on_sys_path(tmp_path):
    found = resolve(str(CHECKOUT / "cleanrl" / "dqn.py"), cwd=tmp_path)
    assert found.source == "script" and found.checkout_root == CHECKOUT.resolve()


def test_script_path_errors(tmp_path):
    assert "does not exist" in error_of("nothere/x.py", cwd=tmp_path)
    assert "--algo ppo" in error_of("ppo.py", cwd=tmp_path)  # a registered name written as a file
    (tmp_path / "notes.txt").write_text("x")
    assert "not a Python script" in error_of("./notes.txt", cwd=tmp_path)
    (tmp_path / "dir.py").mkdir()
    assert "not a Python script" in error_of("dir.py", cwd=tmp_path)


# ---------------------------------------------------------------------------- plugins
def test_example_package_algorithm_is_found_without_importing_the_algorithm():
    code = (
        "import sys; from cleanrl_worker.registry import resolve; a = resolve('example_random'); "
        "print(a.source, a.script.name, a.checkout_root, 'mosaic_example_plugin.random_agent' in sys.modules, "
        "any(m in sys.modules for m in ('torch', 'gymnasium', 'tyro')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["plugin", "random_agent.py", "None", "False", "False"]
    assert "mosaic-example-plugin" in resolve("example_random").detail


def test_a_module_is_not_imported_and_a_function_returns_a_path(tmp_path, site):
    target = tmp_path / "elsewhere" / "algo.py"
    target.parent.mkdir()
    target.write_text(SCRIPT)
    add_algorithms(
        site,
        "third-party-algos",
        {"explodes_on_import": "explosive_algo", "by_function": "algo_paths:where"},
        {
            "explosive_algo": "raise RuntimeError('imported!')\n",
            "algo_paths": f"def where():\n    return {str(target)!r}\n",
        },
    )
    found = resolve("explodes_on_import")
    assert found.source == "plugin" and found.script == (site / "explosive_algo.py").resolve()
    assert "explosive_algo" not in sys.modules
    found = resolve("by_function")
    assert found.script == target.resolve() and "third-party-algos 1.0" in found.detail


def test_broken_algorithms_name_themselves_their_plugin_and_distribution(site):
    add_algorithms(
        site,
        "broken-algos",
        {
            "ghost": "no_such_module_qq",
            "raises": "bad_paths:boom",
            "nowhere": "bad_paths:missing",
            "notpy": "bad_paths:text",
        },
        {
            "bad_paths": "def boom():\n    raise RuntimeError('kaboom')\n"
            "def missing():\n    return '/no/such/script.py'\n"
            "def text():\n    return __file__.replace('.py', '.txt')\n"
        },
    )
    (site / "bad_paths.txt").write_text("not python")
    for name, why in [
        ("ghost", "no_such_module_qq"),
        ("raises", "kaboom"),
        ("nowhere", "/no/such/script.py"),
        ("notpy", "not an existing .py script"),
    ]:
        message = error_of(name)
        assert f"{name!r} = " in message and "entry point 'broken-algos'" in message and why in message
        assert "broken-algos 1.0" in message
    entry = next(e for e in list_algorithms() if e.name == "ghost")
    assert entry.winner is None and "no_such_module_qq" in entry.error


def test_two_distributions_declaring_one_name_is_an_error_naming_both(site):
    for dist in ("algos-one", "algos-two"):
        add_algorithms(
            site, dist, {"twin": f"{dist.replace('-', '_')}_twin"}, {f"{dist.replace('-', '_')}_twin": SCRIPT}
        )
    message = error_of("twin")
    assert "algos-one" in message and "algos-two" in message


def test_an_algorithm_package_loads_without_the_cleanrl_worker(mosaic):
    """The example package implements the worker's hook as optional: with the CleanRL plugin
    disabled (strict mode), it loads, and only the worker and its algorithms are gone."""
    env = {"MOSAIC_DISABLE_PLUGINS": "cleanrl", "MOSAIC_STRICT_PLUGINS": "1"}
    plugins = {p["name"]: p for p in json.loads(mosaic("plugins", "--json", env=env).stdout)}
    assert plugins["example-provides"]["status"] == "active" and plugins["cleanrl"]["status"] == "blocked"
    workers = json.loads(mosaic("workers", "--json", env=env).stdout)
    assert "cleanrl" not in {w["name"] for w in workers} and "example" in {w["name"] for w in workers}
    refused = mosaic("run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--dry-run", env=env)
    assert refused.returncode == 2 and refused.stderr.strip().endswith(
        "(plugin 'cleanrl' is not loaded: listed in MOSAIC_DISABLE_PLUGINS)"
    )


# ---------------------------------------------------------------------------- checkout
def test_checkout_from_extras_and_from_the_environment(tmp_path, monkeypatch):
    found = resolve("dqn", cleanrl_home=str(CHECKOUT), cwd=tmp_path)
    assert (found.source, found.checkout_root) == ("checkout", CHECKOUT.resolve())
    assert found.script == (CHECKOUT / "cleanrl" / "dqn.py").resolve() and "extras.cleanrl_home" in found.detail
    monkeypatch.setenv(registry.HOME_VAR, str(CHECKOUT))
    assert registry.HOME_VAR in resolve("dqn", cwd=tmp_path).detail
    # extras.cleanrl_home beats the environment variable
    other = make_checkout(tmp_path / "other", "dqn")
    assert resolve("dqn", cleanrl_home=other, cwd=tmp_path).checkout_root == other.resolve()
    # relative homes resolve against cwd
    assert resolve("dqn", cleanrl_home="other", cwd=tmp_path).checkout_root == other.resolve()


def test_checkout_with_a_folder_per_algorithm(tmp_path):
    home = make_checkout(tmp_path / "home")
    nested = home / "cleanrl" / "ppo_trxl" / "ppo_trxl.py"
    nested.parent.mkdir(parents=True)
    nested.write_text(SCRIPT)
    assert resolve("ppo_trxl", cleanrl_home=home, cwd=tmp_path).script == nested.resolve()
    assert any(e.name == "ppo_trxl" and e.winner.source == "checkout" for e in list_algorithms(home))


def test_checkout_without_the_name_falls_through_and_says_so(tmp_path):
    home = make_checkout(tmp_path / "home", "dqn")
    if "ppo" not in registry.bundled_names():
        pytest.skip("no bundled ppo yet")
    found = resolve("ppo", cleanrl_home=home, cwd=tmp_path)
    assert found.source == "bundled" and f"not in CleanRL checkout {home.resolve()}" in found.detail


def test_bad_checkout_paths(tmp_path, monkeypatch):
    assert "is not a directory" in error_of("dqn", cleanrl_home=tmp_path / "missing", cwd=tmp_path)
    assert "extras.cleanrl_home must be the path" in error_of("dqn", cleanrl_home=5, cwd=tmp_path)
    (tmp_path / "empty").mkdir()
    assert "no cleanrl/ folder" in error_of("dqn", cleanrl_home=tmp_path / "empty", cwd=tmp_path)
    home = make_checkout(tmp_path / "repo", "dqn")
    message = error_of("dqn", cleanrl_home=home / "cleanrl", cwd=tmp_path)  # the inner folder by mistake
    assert f"did you mean its parent {home.resolve()}" in message
    monkeypatch.setenv(registry.HOME_VAR, str(tmp_path / "missing"))
    assert registry.HOME_VAR in error_of("dqn", cwd=tmp_path)


def test_upstream_name_without_a_checkout_says_how_to_get_one(tmp_path):
    message = error_of("rainbow_atari", cwd=tmp_path)
    for needed in (
        "git clone https://github.com/vwxyzjn/cleanrl",
        "MOSAIC_CLEANRL_HOME",
        "extras.cleanrl_home",
        "no CleanRL checkout is configured",
    ):
        assert needed in message
    message = error_of("rainbow_atari", cleanrl_home=CHECKOUT, cwd=tmp_path)
    assert f"{CHECKOUT.resolve()} has no cleanrl/rainbow_atari.py" in message


# ---------------------------------------------------------------------------- installed package
def test_installed_cleanrl_package_in_a_real_interpreter(tmp_path):
    """An importable `cleanrl` (here the fixture checkout on PYTHONPATH), found without importing it."""
    code = (
        "import sys; from cleanrl_worker.registry import resolve; a = resolve('dqn'); "
        "print(a.source, a.checkout_root, 'cleanrl' in sys.modules)"
    )
    env = {"PYTHONPATH": str(CHECKOUT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=tmp_path
    ).stdout.split()
    assert out == ["installed", str(CHECKOUT.resolve()), "False"]


# ---------------------------------------------------------------------------- bundled and unknown
def test_bundled_algorithms_resolve_when_present(tmp_path):
    names = registry.bundled_names()
    if not names:
        pytest.skip("no bundled algorithms in this checkout yet")
    for name in names:
        found = resolve(name, cwd=tmp_path)
        assert found.source == "bundled" and found.script == registry.BUNDLED_DIR / f"{name}.py"
        assert found.checkout_root is None


def test_unknown_names_suggest_the_closest_and_list_the_known_ones(tmp_path):
    message = error_of("ppo_atri", cwd=tmp_path)
    assert "unknown algorithm 'ppo_atri' (did you mean 'ppo_atari'?)" in message
    assert "example_random" in message and "sac_continuous_action" in message
    assert "did you mean" not in error_of("zzzzzz", cwd=tmp_path)
    assert "neither an algorithm name" in error_of("ppo;rm", cwd=tmp_path)
    assert "must be an algorithm name" in error_of("  ", cwd=tmp_path)


def test_list_covers_every_known_name_with_json_ready_entries(tmp_path):
    entries = {e.name: e for e in list_algorithms(CHECKOUT, cwd=tmp_path)}
    assert set(registry.CLEANRL_ALGORITHMS) <= set(entries)
    assert entries["dqn"].winner.source == "checkout" and entries["example_random"].winner.source == "plugin"
    assert entries["rainbow_atari"].sources == () and entries["rainbow_atari"].upstream
    json.dumps([e.to_dict() for e in entries.values()])


# ---------------------------------------------------------------------------- mosaic algos
def test_mosaic_algos_json_through_the_real_cli(mosaic):
    result = mosaic("algos", "--json", env={registry.HOME_VAR: str(CHECKOUT)})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["resolution_order"] == list(RESOLUTION_ORDER)
    algos = {a["name"]: a for a in data["algorithms"]}
    assert algos["dqn"]["winner"] == "checkout" and algos["dqn"]["sources"][0]["checkout_root"] == str(
        CHECKOUT.resolve()
    )
    assert algos["example_random"]["winner"] == "plugin"
    assert algos["ppo"]["sources"][0]["source"] == "checkout"
    if "ppo" in registry.bundled_names():
        assert [s["source"] for s in algos["ppo"]["sources"]] == ["checkout", "bundled"]


def test_mosaic_algos_table_marks_the_winner_and_prints_the_order(mosaic):
    result = mosaic("algos", "--cleanrl-home", str(CHECKOUT))
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if " dqn " in line)
    assert "*checkout" in row
    assert "resolution order: script path > plugin (mosaic_cleanrl_algorithms)" in " ".join(result.stdout.split())
    assert "rainbow_atari" in result.stdout  # one of MOSAIC's documented names: always listed, with its status
    assert "ppo_trxl" not in result.stdout  # an upstream name outside MOSAIC's table
    assert "ppo_trxl" in mosaic("algos", "--all").stdout


def test_mosaic_algos_bad_home_is_one_line_exit_2(mosaic, tmp_path):
    result = mosaic("algos", "--cleanrl-home", str(tmp_path / "nope"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "--cleanrl-home=" in result.stderr


def test_the_worker_modules_stay_import_light():
    """What the host imports to plan a run never pulls in torch, gymnasium, tyro or the like."""
    code = f"""
import sys
from cleanrl_worker import plugin, registry, flags, script_args
registry.list_algorithms({str(CHECKOUT)!r})
registry.resolve('example_random')
flags.extras_to_flags({{'learning_rate': 0.1, 'algo_params': {{'track': True}}}})
script_args.check_script_argv({str(CHECKOUT / "cleanrl" / "dqn.py")!r}, ['--seed', '1'])
heavy = ('torch', 'gymnasium', 'tyro', 'tensorboard', 'wandb', 'matplotlib', 'numpy', 'rich')
print(sorted(m for m in heavy if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("ab./_~\x00\n") | st.characters(), max_size=30) | st.just("a" * 300 + ".py"))
def test_any_algo_string_resolves_or_gives_a_one_line_usage_error(algo):
    try:
        found = resolve(algo, cwd=CHECKOUT)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert found.source in RESOLUTION_ORDER and found.script.is_file()
