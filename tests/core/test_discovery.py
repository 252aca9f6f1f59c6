"""Discovery through real entry points: the installed example package, and tiny
distributions written to a folder on PYTHONPATH (broken, wrongly typed, duplicate)."""

import json

import pytest

from tests.core.distributions import make_distribution

GOOD_PLUGIN = (
    "from mosaic_core.hookspecs import hookimpl\n\n@hookimpl\ndef mosaic_on_heartbeat(run):\n    return {'x': 1}\n"
)


@pytest.fixture
def site(tmp_path):
    return tmp_path / "site"


def plugins_json(mosaic, env=None):
    result = mosaic("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return {p["name"]: p for p in json.loads(result.stdout)}


def test_example_package_is_discovered_with_its_hooks(mosaic):
    plugins = plugins_json(mosaic)
    example = plugins["example"]
    assert example["distribution"] == "mosaic-example-plugin" and example["version"] == "0.2.0"
    assert example["status"] == "active"
    assert set(example["hooks"]) == {
        "mosaic_build_manifest",
        "mosaic_child_env",
        "mosaic_on_heartbeat",
        "mosaic_extras_keys",
        "mosaic_validate_config",
        "mosaic_on_event",
    }
    for builtin in ("cleanrl", "fastlane", "analytics", "curriculum"):
        assert plugins[builtin]["distribution"] == "mosaic-rl"


def test_workers_table_and_json(mosaic):
    table = mosaic("workers")
    assert table.returncode == 0 and "cleanrl" in table.stdout and "sequential" in table.stdout
    workers = json.loads(mosaic("workers", "--json").stdout)
    cleanrl = next(w for w in workers if w["name"] == "cleanrl")
    assert cleanrl["capabilities"]["worker_type"] == "cleanrl" and cleanrl["upstream_library"] == "cleanrl"


def test_broken_missing_and_wrong_type_plugins_are_reported_not_fatal(mosaic, site):
    make_distribution(
        site,
        "broken-plugins",
        {
            "mosaic.plugins": {
                "crashes": "crashing_plugin",
                "missing": "no_such_module_xyz",
                "notamodule": "typed_plugin:VALUE",
                "good": "good_plugin",
            }
        },
        {
            "crashing_plugin": "raise RuntimeError('boom at import')\n",
            "typed_plugin": "VALUE = 42\n",
            "good_plugin": GOOD_PLUGIN,
        },
    )
    plugins = plugins_json(mosaic, env={"PYTHONPATH": str(site)})
    assert plugins["crashes"]["status"] == "failed" and "boom at import" in plugins["crashes"]["error"]
    assert plugins["crashes"]["distribution"] == "broken-plugins"
    assert plugins["missing"]["status"] == "failed" and "no_such_module_xyz" in plugins["missing"]["error"]
    assert (
        plugins["notamodule"]["status"] == "failed"
        and "module of hook implementations" in plugins["notamodule"]["error"]
    )
    assert plugins["good"]["status"] == "active" and plugins["good"]["hooks"] == ["mosaic_on_heartbeat"]
    # the host still works: other commands and --help
    assert mosaic("--help", env={"PYTHONPATH": str(site)}).returncode == 0


def test_unknown_hook_name_fails_that_plugin_only(mosaic, site):
    make_distribution(
        site,
        "typo-plugin",
        {"mosaic.plugins": {"typo": "typo_plugin"}},
        {
            "typo_plugin": "from mosaic_core.hookspecs import hookimpl\n\n@hookimpl\ndef mosaic_on_hartbeat(run):\n    pass\n"
        },
    )
    plugins = plugins_json(mosaic, env={"PYTHONPATH": str(site)})
    assert plugins["typo"]["status"] == "failed" and "mosaic_on_hartbeat" in plugins["typo"]["error"]


def test_duplicate_names_name_both_providers(mosaic, site):
    make_distribution(site, "copycat", {"mosaic.plugins": {"example": "good_plugin"}}, {"good_plugin": GOOD_PLUGIN})
    result = mosaic("plugins", "--json", env={"PYTHONPATH": str(site)})
    records = [p for p in json.loads(result.stdout) if p["name"] == "example"]
    failed = [r for r in records if r["status"] == "failed"]
    assert len(failed) == 1
    assert "copycat" in failed[0]["error"] and "mosaic-example-plugin" in failed[0]["error"]


def test_allow_and_block_lists(mosaic):
    only = plugins_json(mosaic, env={"MOSAIC_LOAD_PLUGINS": "example"})
    assert only["example"]["status"] == "active"
    assert all(p["status"] == "blocked" for n, p in only.items() if n != "example")
    none = plugins_json(mosaic, env={"MOSAIC_LOAD_PLUGINS": ""})
    assert all(p["status"] == "blocked" for p in none.values())
    disabled = plugins_json(mosaic, env={"MOSAIC_DISABLE_PLUGINS": "example,fastlane"})
    assert disabled["example"]["status"] == "blocked" and "MOSAIC_DISABLE_PLUGINS" in disabled["example"]["error"]
    assert disabled["analytics"]["status"] == "active"


def test_strict_mode_turns_a_load_failure_into_an_error(mosaic, site):
    make_distribution(
        site,
        "broken-plugins",
        {"mosaic.plugins": {"crashes": "crashing_plugin"}},
        {"crashing_plugin": "raise RuntimeError('boom')\n"},
    )
    result = mosaic("plugins", env={"PYTHONPATH": str(site), "MOSAIC_STRICT_PLUGINS": "1"})
    assert result.returncode == 2
    assert "crashes" in result.stderr and "broken-plugins" in result.stderr and "boom" in result.stderr
    assert "Traceback" not in result.stderr


def test_broken_and_wrong_type_workers(mosaic, site):
    make_distribution(
        site,
        "bad-workers",
        {"mosaic.workers": {"crashy": "crashy_worker:get", "wrongtype": "wrong_worker:get"}},
        {
            "crashy_worker": "def get():\n    raise ValueError('no metadata today')\n",
            "wrong_worker": "def get():\n    return {'name': 'wrongtype'}\n",
        },
    )
    env = {"PYTHONPATH": str(site)}
    workers = {w["name"]: w for w in json.loads(mosaic("workers", "--json", env=env).stdout)}
    assert workers["crashy"]["status"] == "failed" and "no metadata today" in workers["crashy"]["error"]
    assert workers["wrongtype"]["status"] == "failed" and "expected WorkerMetadata" in workers["wrongtype"]["error"]
    assert workers["cleanrl"]["status"] == "active"
    result = mosaic("run", "--worker", "crashy", env=env)
    assert result.returncode == 2 and "failed to load" in result.stderr and "bad-workers" in result.stderr


def test_unknown_worker_lists_installed(mosaic):
    result = mosaic("run", "--worker", "sb3", "--algo", "ppo")
    assert result.returncode == 2 and "unknown worker 'sb3'" in result.stderr and "cleanrl" in result.stderr
    typo = mosaic("workers", "install", "cleanr")
    assert typo.returncode == 2 and typo.stderr.startswith(
        "mosaic: error: unknown worker 'cleanr' (did you mean cleanrl?); installed workers: cleanrl, "
    )


def test_every_installed_plugin_loads_in_strict_mode(mosaic):
    result = mosaic("plugins", "--json", env={"MOSAIC_STRICT_PLUGINS": "1"})
    assert result.returncode == 0, result.stderr
    assert all(p["status"] == "active" for p in json.loads(result.stdout))
