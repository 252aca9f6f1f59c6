"""Registration: third-party distributions (on PYTHONPATH, found by importlib.metadata as
pip-installed ones) register workers through ``mosaic.workers`` (the design card's group, MOSAIC's
``pkg:get_worker_metadata``) or a ``mosaic.plugins`` module's hook, and launchers through hooks; a
worker's run hooks run for its own runs only, in the host and in the training process; the old
launcher group still works, with a one-line deprecation notice. Through the real CLI and real runs."""

from __future__ import annotations

import json

import pytest

from tests.core.distributions import make_distribution

CAPS = (
    "WorkerCapabilities(supported_paradigms=('sequential',), env_families=('gymnasium',), "
    "action_spaces=('discrete',), observation_spaces=('vector',))"
)

# The example worker's class under another name, with run hooks that log where they ran.
HOOKED = f"""
from mosaic_core import WorkerCapabilities, WorkerMetadata, hookimpl

@hookimpl
def mosaic_workers():
    return [WorkerMetadata(name="hooked", version="1.0", description="the example worker, with run hooks",
                           capabilities={CAPS}, worker="mosaic_example_plugin.worker:ExampleWorker",
                           run_hooks="hooked_run_hooks", example=True)]
"""
HOOKED_RUN_HOOKS = """
import json, os
from mosaic_core import hookimpl

def _log(run_dir, where, worker):
    with open(os.path.join(run_dir, "hooked.jsonl"), "a") as fh:
        fh.write(json.dumps([where, worker]) + "\\n")

@hookimpl
def mosaic_run_started(run):
    _log(run.run_dir, "host", run.worker)

@hookimpl
def mosaic_child_setup(child):
    _log(child.run_dir, "training process", child.worker)

@hookimpl
def mosaic_build_manifest(run, status):
    return {"hooked": {"worker": run.worker}}
"""
LAUNCHER = """
from mosaic_core import hookimpl
from mosaic_core.launchers import Launcher, LauncherOption

class Kube(Launcher):
    name, description = "kube", "a Kubernetes Job per run"
    options = (LauncherOption("--kube-namespace", "MOSAIC_KUBE_NAMESPACE", "run in this namespace",
                              metavar="NS", selects=True),)

    def execute(self, job):
        raise RuntimeError("no cluster here")

@hookimpl
def mosaic_launchers():
    return [Kube()]
"""
EXAMPLE_RUN = ["--env-id", "CartPole-v1", "--total-timesteps", "200"]


@pytest.fixture
def site(tmp_path):
    return tmp_path / "site"


def test_a_worker_s_run_hooks_run_for_its_runs_only_in_the_host_and_the_training_process(mosaic, site, runs_root):
    make_distribution(
        site,
        "mosaic-hooked",
        {"mosaic.plugins": {"hooked": "hooked_plugin"}},
        {"hooked_plugin": HOOKED, "hooked_run_hooks": HOOKED_RUN_HOOKS},
    )
    env = {"PYTHONPATH": str(site)}
    own = mosaic("run", "--worker", "hooked", *EXAMPLE_RUN, "--run-id", "own", "--json", env=env)
    assert own.returncode == 0, own.stderr
    other = mosaic("run", "--worker", "example", *EXAMPLE_RUN, "--run-id", "other", "--json", env=env)
    assert other.returncode == 0, other.stderr
    logged = [json.loads(line) for line in (runs_root / "own" / "hooked.jsonl").read_text().splitlines()]
    assert ["host", "hooked"] in logged and ["training process", "hooked"] in logged
    assert not (runs_root / "other" / "hooked.jsonl").exists()
    manifests = {rid: json.loads((runs_root / rid / "manifest.json").read_text()) for rid in ("own", "other")}
    assert manifests["own"]["hooked"] == {"worker": "hooked"} and "hooked" not in manifests["other"]
    assert "worker:hooked" in manifests["own"]["plugins"]["active"]
    assert "worker:hooked" not in manifests["other"]["plugins"]["active"]
    listed = {p["name"]: p for p in json.loads(mosaic("plugins", "--json", env=env).stdout)}
    assert listed["hooked"]["hooks"] == ["mosaic_workers"]
    assert listed["hooked"]["workers"] == {
        "hooked": ["mosaic_build_manifest", "mosaic_child_setup", "mosaic_run_started"]
    }


def test_a_broken_run_hooks_module_stops_the_worker_s_runs_in_one_line(mosaic, site, workdir):
    make_distribution(
        site,
        "mosaic-hooked",
        {"mosaic.plugins": {"hooked": "hooked_plugin"}},
        {"hooked_plugin": HOOKED, "hooked_run_hooks": "raise RuntimeError('no hooks today')\n"},
    )
    result = mosaic("run", "--worker", "hooked", *EXAMPLE_RUN, "--run-id", "broken", env={"PYTHONPATH": str(site)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "mosaic: error: worker 'hooked' (mosaic-hooked 1.0): its run hooks hooked_run_hooks failed to load: "
        "RuntimeError: no hooks today"
    )


def test_broken_worker_descriptors_name_their_plugin_and_distribution(mosaic, site):
    make_distribution(
        site,
        "bad-workers",
        {"mosaic.plugins": {"crashy": "crashy_plugin", "wrongtype": "wrong_plugin", "copycat": "copy_plugin"}},
        {
            "crashy_plugin": "from mosaic_core import hookimpl\n\n@hookimpl\ndef mosaic_workers():\n"
            "    raise ValueError('no metadata today')\n",
            "wrong_plugin": "from mosaic_core import hookimpl\n\n@hookimpl\ndef mosaic_workers():\n"
            "    return [{'name': 'wrongtype'}]\n",
            "copy_plugin": HOOKED.replace('name="hooked"', 'name="cleanrl"'),
        },
    )
    env = {"PYTHONPATH": str(site)}
    listed = mosaic("workers", "--json", env=env)
    workers = json.loads(listed.stdout)
    by_plugin = {(w["plugin"], w["name"]): w for w in workers}
    crashy = by_plugin[("crashy", "crashy")]
    assert crashy["status"] == "failed" and crashy["error"].startswith(
        "entry point 'crashy' (crashy_plugin) from bad-workers 1.0: mosaic_workers raised ValueError: no metadata today"
    )
    assert by_plugin[("wrongtype", "wrongtype")]["error"] == (
        "entry point 'wrongtype' (wrong_plugin) from bad-workers 1.0: mosaic_workers returned "
        "{'name': 'wrongtype'}; expected WorkerMetadata"
    )
    assert by_plugin[(None, "cleanrl")]["status"] == "active"  # the mosaic.workers entry point
    copy = by_plugin[("copycat", "cleanrl")]
    assert copy["status"] == "failed" and "duplicate name 'cleanrl'" in copy["error"] and "bad-workers" in copy["error"]
    result = mosaic("run", "--worker", "crashy", env=env)
    assert result.returncode == 2 and "failed to load" in result.stderr and "bad-workers" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_plugin_provides_a_launcher_whose_options_become_flags(mosaic, site):
    make_distribution(site, "mosaic-kube", {"mosaic.plugins": {"kube": "kube_plugin"}}, {"kube_plugin": LAUNCHER})
    env = {"PYTHONPATH": str(site)}
    helped = mosaic("run", "--worker", "example", "--help", env=env)
    assert helped.returncode == 0 and "--kube-namespace NS" in helped.stdout and "kube launcher" in helped.stdout
    listed = {p["name"]: p for p in json.loads(mosaic("plugins", "--json", env=env).stdout)}
    assert listed["kube"]["launchers"] == ["kube"] and listed["kube"]["hooks"] == ["mosaic_launchers"]


def test_the_workers_group_registers_mosaic_s_way_and_names_a_broken_entry(mosaic, site):
    """``mosaic.workers`` entries: a function returning the metadata or MOSAIC's (metadata,
    capabilities) pair, or the metadata itself, each named by its entry point, no notice; a
    broken one is listed as failed, naming its entry point and distribution."""
    make_distribution(
        site,
        "mosaic-third",
        {
            "mosaic.workers": {
                "oldie": "third_pkg:METADATA",
                "pair": "third_pkg:get_worker_metadata",
                "broken": "third_pkg:broken",
                "wrong": "third_pkg:wrong",
            }
        },
        {
            "third_pkg": "from mosaic_core import WorkerCapabilities, WorkerMetadata\n"
            f"METADATA = WorkerMetadata(version='1', description='d', capabilities={CAPS}, "
            "worker='mosaic_example_plugin.worker:ExampleWorker', example=True)\n"
            "def get_worker_metadata():\n    return METADATA, METADATA.capabilities\n"
            "def broken():\n    raise RuntimeError('no metadata today')\n"
            "def wrong():\n    return {'name': 'wrong'}\n"
        },
    )
    env = {"PYTHONPATH": str(site)}
    listed = mosaic("workers", "--json", env=env)
    workers = {w["name"]: w for w in json.loads(listed.stdout)}
    assert "deprecated" not in listed.stderr
    for name in ("oldie", "pair"):
        assert workers[name]["status"] == "active" and workers[name]["distribution"] == "mosaic-third"
    assert workers["broken"]["status"] == "failed" and "no metadata today" in workers["broken"]["error"]
    assert "mosaic-third" in workers["broken"]["error"]
    assert workers["wrong"]["status"] == "failed" and "expected WorkerMetadata" in workers["wrong"]["error"]
    ran = mosaic("run", "--worker", "pair", *EXAMPLE_RUN, "--dry-run", env=env)
    assert ran.returncode == 0, ran.stderr
    blocked = mosaic(
        "run", "--worker", "pair", *EXAMPLE_RUN, "--dry-run", env={**env, "MOSAIC_DISABLE_PLUGINS": "pair"}
    )
    assert blocked.returncode == 2 and "listed in MOSAIC_DISABLE_PLUGINS" in blocked.stderr


def test_the_deprecated_launcher_group_still_registers_with_a_one_line_notice(mosaic, site):
    make_distribution(
        site,
        "mosaic-old",
        {"mosaic.launchers": {"oldlaunch": "old_pkg:launcher"}},
        {
            "old_pkg": "from mosaic_core.launchers import Launcher\n"
            "class Old(Launcher):\n    name, description = 'oldlaunch', 'd'\n    def execute(self, job):\n        return 0\n"
            "def launcher():\n    return Old()\n"
        },
    )
    env = {"PYTHONPATH": str(site)}
    helped = mosaic("run", "--worker", "example", "--help", env=env)
    assert "--launcher NAME" in helped.stdout and "oldlaunch" in helped.stdout
    notices = [line for line in helped.stderr.splitlines() if "deprecated" in line]
    assert len(notices) == 1 and "launcher 'oldlaunch' through the 'mosaic.launchers'" in notices[0]


def test_our_own_distributions_register_workers_in_the_workers_group_and_the_rest_as_plugins():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for pyproject in [root / "pyproject.toml", *root.glob("examples/*/pyproject.toml")]:
        groups = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
        ours = [g for g in groups if g.startswith("mosaic.") and g != "mosaic.operators"]  # the arena's own group
        assert ours == ["mosaic.workers", "mosaic.plugins"], pyproject
        assert all(value.endswith("worker_metadata") for value in groups["mosaic.workers"].values())
