"""Issue 35, classes 4 and 8, as another local user (uid 65534) would attack: a folder everyone can
write (``/tmp``, a shared project) holds their ``venv.py``, ``pip.py``, ``sitecustomize.py``,
``mosaic_core/``, ``cleanrl_worker/``… (:mod:`tests.security.planted`); the owner types our
commands there. Every Python program those commands start runs isolated (``-I``/``-P``, a folder
of its own; ``PYTHONSAFEPATH`` for what libraries start), so nothing planted is imported and
every command still works: ``run`` (train and evaluate), ``enjoy``, ``sweep run``, ``serve``,
``daemon`` with a submitted run, ``workers install`` (its venv and pip steps). ``--ray-address``
is in tests/ray_launcher/test_ray_planted_cwd.py. Also: the venvs root's ancestors are checked as
a runs root's are, and the bad inputs of item 8 are one line, exit 2, nothing left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import BIN, run_cli
from tests.security.planted import PlantedFolder
from tests.trainer.second_user import AS_NOBODY, needs_second_user

TINY = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "256", "--quiet"]
SWEEP = """
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 256
seeds = 1
max_trials = 1

[objective]
metric = "charts/episodic_return"
last_n = 1

[sampler]
type = "random"
seed = 0

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""


@pytest.fixture(scope="module")
def planted():
    if os.geteuid() != 0 or not Path(AS_NOBODY[0]).exists():
        pytest.skip("acting as a second user needs root and setpriv (util-linux) to drop to uid 65534")
    folder = PlantedFolder()
    yield folder
    folder.remove()


@pytest.fixture(scope="module")
def private(tmp_path_factory) -> Path:
    """The owner's own folder: runs, specs, state and worker environments live here."""
    return tmp_path_factory.mktemp("owner")


def _one_line(result, *words: str) -> str:
    """Exit 2 with one error line, the last (``workers install`` says first what it builds)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("mosaic: error: ")]
    assert errors == lines[-1:] and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


@needs_second_user
def test_runs_evaluation_enjoy_and_a_sweep_from_a_planted_folder_import_nothing_of_it(planted, private):
    runs = private / "runs"
    trained = run_cli([*TINY, "--runs-dir", str(runs), "--run-id", "base"], cwd=planted.path)
    assert trained.returncode == 0, trained.stderr
    assert trained.events[-1]["event"] == "run_completed"
    checkpoint = next((runs / "base").rglob("*.cleanrl_model"))
    evaluated = run_cli(
        [
            "run",
            "--worker",
            "cleanrl",
            "--env-id",
            "CartPole-v1",
            "--runs-dir",
            str(runs),
            "--quiet",
            "--run-id",
            "eval",
            "--extras",
            json.dumps({"mode": "policy_eval", "eval_episodes": 1, "policy_path": str(checkpoint)}),
        ],
        cwd=planted.path,
    )
    assert evaluated.returncode == 0 and evaluated.events[-1]["event"] == "run_completed", evaluated.stderr
    enjoyed = run_cli(["enjoy", "base", "--episodes", "1", "--runs-dir", str(runs), "--json"], cwd=planted.path)
    assert enjoyed.returncode == 0, enjoyed.stderr
    spec = private / "tiny.toml"
    spec.write_text(SWEEP, encoding="utf-8")
    swept = run_cli(
        ["sweep", "run", str(spec), "--storage", f"sqlite:///{private / 'tiny.db'}", "--runs-dir", str(runs)],
        cwd=planted.path,
        timeout=600,
    )
    assert swept.returncode == 0, swept.stderr
    assert list(runs.glob("tiny-t0-s*"))
    assert planted.markers() == {}


@needs_second_user
def test_the_dashboard_and_a_daemon_run_from_a_planted_folder_import_nothing_of_it(planted, private):
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb
    from tests.trainer.conftest import DaemonProcess, wait_final

    serve = subprocess.Popen(
        [str(BIN / "mosaic"), "serve", "--port", "0", "--runs-dir", str(private / "runs")],
        cwd=planted.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert json.loads(serve.stdout.readline())["url"].startswith("http://127.0.0.1:")
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        finally:
            if serve.poll() is None:  # the test fails on the timeout; the server is not left behind
                serve.kill()
                serve.wait()
    daemon = DaemonProcess(
        [str(BIN / "mosaic"), "daemon", "--listen", "127.0.0.1:0", "--state-dir", str(private / "state")], planted.path
    )
    try:
        config = {"worker": "cleanrl", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 256}
        run_id = client.submit(daemon.target, json.dumps(config), token=daemon.token).run_id
        final = wait_final(daemon.target, run_id, timeout=180, token=daemon.token)
        assert (final.status, final.terminal_event) == (pb.RUN_STATUS_TERM, "run_completed"), final.failure_reason
    finally:
        daemon.stop()
    assert planted.markers() == {}


@needs_second_user
def test_workers_install_from_a_planted_folder_runs_its_venv_and_pip_steps_isolated(planted, private):
    """pip is kept from any index (``PIP_NO_INDEX``): the venv step runs whole, pip starts and
    fails on the first requirement, cheaply. Neither imported the folder's ``venv.py``/``pip.py``."""
    venvs = private / "venvs"
    done = run_cli(
        ["workers", "install", "example-venv"],
        cwd=planted.path,
        env={"MOSAIC_VENVS": str(venvs), "PIP_NO_INDEX": "1"},
        timeout=600,
    )
    _one_line(done, "example-venv", "failed to build: pip could not install")
    assert sorted(p.name for p in venvs.iterdir()) == ["example-venv.install.log", "example-venv.lock"]
    assert planted.markers() == {}


# ------------------------------------------------------------------ the venvs root and bad inputs
@needs_second_user
def test_a_venvs_root_in_a_folder_another_user_owns_is_refused(planted, private):
    """uid 65534 owns a folder in the shared one; a venvs root inside it (they could rename it and
    put theirs in its place) is refused before anything is made, as a runs root would be."""
    theirs = planted.path / "theirs"
    made = subprocess.run([*AS_NOBODY, "mkdir", "-m", "755", str(theirs)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    venvs = theirs / "venvs"
    for argv in (
        ["workers", "install", "example-venv"],
        [
            "run",
            "--worker",
            "example-venv",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "100",
            "--runs-dir",
            str(private / "refused-runs"),
        ],
    ):
        done = run_cli(argv, cwd=private, env={"MOSAIC_VENVS": str(venvs)})
        _one_line(done, f"worker environments directory {venvs}", f"lies in {theirs}", "nobody")
    assert not venvs.exists() and not list(private.glob("refused-runs/*/config.json"))


def test_a_failed_venv_step_is_one_line_and_leaves_no_environment(private):
    """Something in the way of the venv (here a file where the environment goes): one line naming
    the step and its error, exit 2, no environment."""
    from mosaic_core.environments import _plan
    from mosaic_core.workers import find_worker

    item = find_worker("example-venv")
    _args, key = _plan(item.obj, item.distribution, ())
    venvs = private / "venvs-blocked"
    venvs.mkdir(mode=0o700)
    (venvs / f"example-venv-{key}").write_text("in the way\n")
    done = run_cli(["workers", "install", "example-venv"], cwd=private, env={"MOSAIC_VENVS": str(venvs)})
    _one_line(done, "example-venv", "-m venv", "failed")
    assert sorted(p.name for p in venvs.iterdir()) == [f"example-venv-{key}", "example-venv.lock"]


def test_empty_extras_names_are_refused(private):
    venvs = private / "venvs-extras"
    for extras in (",,", "", "atari,", " "):
        done = run_cli(
            ["workers", "install", "example-venv", "--extras", extras], cwd=private, env={"MOSAIC_VENVS": str(venvs)}
        )
        _one_line(done, "--extras", "an empty name")
    assert not venvs.exists()


@pytest.mark.parametrize("address", ["ray://", "", " ", "ray://:10001", "host:0"])
def test_bad_ray_addresses_are_one_line_and_leave_no_run(address, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    done = run_cli([*TINY, "--runs-dir", str(runs), "--ray-address", address], cwd=tmp_path)
    _one_line(done, "--ray-address")
    assert list(runs.iterdir()) == []
    swept = run_cli(["sweep", "run", str(tmp_path / "none.toml"), "--ray-address", address], cwd=tmp_path)
    assert swept.returncode == 2 and "Traceback" not in swept.stderr, swept.stderr
    if not address.strip():  # refused before the spec is read: never a silent local sweep
        _one_line(swept, "--ray-address is empty")


def test_python_commands_we_build_are_isolated():
    """The helper every command line goes through: ``-I``, or ``-P`` where the program needs its
    environment; ``mosaic`` itself never found on ``PATH``."""
    from mosaic_core import procs

    assert procs.python_command("/py", "-m", "venv", "x") == ["/py", "-I", "-m", "venv", "x"]
    assert procs.python_command("/py", "-m", "m", keep_environment=True) == ["/py", "-P", "-m", "m"]
    assert procs.mosaic_command() == [str(Path(sys.executable).with_name("mosaic"))]
    code = "import sys, os; print(os.getcwd() in sys.path or '' in sys.path)"
    here = Path(tempfile.mkdtemp())
    try:
        for keep in (False, True):
            shown = subprocess.run(
                procs.python_command(sys.executable, "-c", code, keep_environment=keep),
                cwd=here,
                capture_output=True,
                text=True,
            )
            assert shown.stdout.strip() == "False", shown.stderr
    finally:
        here.rmdir()


def test_what_a_command_starts_keeps_the_cwd_off_its_path():
    """``PYTHONSAFEPATH`` for every child; an empty ``PYTHONPATH`` entry (the cwd, ``-P`` or not) dropped."""
    code = (
        "import os; from mosaic_core.procs import keep_cwd_off_child_paths as keep; keep(); "
        "print(os.environ['PYTHONSAFEPATH'], repr(os.environ.get('PYTHONPATH')))"
    )
    for given, kept in ((":/x::/y", "'/x:/y'"), (":", "None"), ("/x", "'/x'")):
        shown = subprocess.run(
            [sys.executable, "-I", "-c", code], env={**os.environ, "PYTHONPATH": given}, capture_output=True, text=True
        )
        assert shown.stdout.split() == ["1", kept], shown.stderr
