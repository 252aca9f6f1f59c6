"""Issue 47, class 4: a spec's secret extras (``wandb_api_key``) never reach a command line.

``experiment run`` and ``sweep run`` start each seed as a ``mosaic run``; another local user
(uid 65534) reads every process's ``/proc/PID/cmdline`` while they do. The key must be on none of
them, yet reach each run (its ``config.json`` records it redacted, ``***``: the run had it). The
watcher also counts the seeds' command lines it saw, so the test cannot pass by seeing nothing."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.security.round4 import mosaic
from tests.trainer.second_user import AS_NOBODY, needs_second_user

# Every /proc/*/cmdline, polled until the stop file appears (the secret to look for in $SECRET): the processes that held the secret,
# and how many distinct ones held the marker (the seeds' `mosaic run`s, by their run ids).
WATCH = r"""
import json, os, sys, time
secret, marker, stop = os.environ["SECRET"].encode(), sys.argv[1].encode(), sys.argv[2]
leaked, seen = {}, set()
while not os.path.exists(stop):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                line = handle.read()
        except OSError:
            continue
        if secret in line:
            leaked[pid] = line.replace(b"\0", b" ").decode(errors="replace")[:500]
        if marker in line and b" run " in line.replace(b"\0", b" "):
            seen.add(pid)
    time.sleep(0.005)
print(json.dumps({"leaked": leaked, "seen": len(seen)}))
"""

EXPERIMENT = """
name = "{name}"
seeds = [1, 2]
total_timesteps = 400
parallel = 2

[[group]]
worker = "example"
algo = "random"
env = "CartPole-v1"
extras = {{ wandb_api_key = "{key}" }}
"""

SWEEP = """
study_name = "{name}"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 512
seeds = 1
max_trials = 1

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-3

[extras]
wandb_api_key = "{key}"
"""


class Watcher:
    """uid 65534 reading every command line while the owner's command runs."""

    def __init__(self, secret: str, marker: str):
        self.folder = Path(tempfile.mkdtemp(prefix="mosaic-watch-"))
        self.folder.chmod(0o1777)
        self.stop_file = self.folder / "stop"
        self.proc = subprocess.Popen(
            [*AS_NOBODY, sys.executable, "-I", "-c", WATCH, marker, str(self.stop_file)],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "SECRET": secret},  # not on its own command line
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)  # it is polling before the command starts

    def result(self) -> dict:
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)
        assert self.proc.returncode == 0, err
        return json.loads(out)


@pytest.fixture
def key() -> str:
    return f"wk-{secrets.token_hex(12)}"


@needs_second_user
def test_experiment_seeds_get_the_key_in_their_environment_not_their_command_line(tmp_path, key):
    name = f"r4key{secrets.token_hex(3)}"
    (tmp_path / "spec.toml").write_text(EXPERIMENT.format(name=name, key=key))
    root = tmp_path / "runs"
    watcher = Watcher(key, name)
    try:
        done = mosaic(tmp_path, "experiment", "run", "spec.toml", "--runs-dir", str(root), timeout=600)
    finally:
        seen = watcher.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert seen["leaked"] == {}, seen["leaked"]
    assert seen["seen"] >= 2, seen  # the preflight's and both seeds' `mosaic run` were watched
    runs = sorted(root.iterdir())
    assert len(runs) == 2
    for run in runs:
        assert json.loads((run / "config.json").read_text())["extras"]["wandb_api_key"] == "***"
        for path in run.rglob("*"):
            assert not path.is_file() or key.encode() not in path.read_bytes(), path


@needs_second_user
def test_sweep_seeds_get_the_key_in_their_environment_not_their_command_line(tmp_path, key):
    name = f"r4sweep{secrets.token_hex(3)}"
    (tmp_path / "sweep.toml").write_text(SWEEP.format(name=name, key=key))
    root = tmp_path / "runs"
    watcher = Watcher(key, name)
    try:
        done = mosaic(tmp_path, "sweep", "run", "sweep.toml", "--runs-dir", str(root), timeout=600)
    finally:
        seen = watcher.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert seen["leaked"] == {}, seen["leaked"]
    assert seen["seen"] >= 1, seen
    (run,) = sorted(root.iterdir())
    assert json.loads((run / "config.json").read_text())["extras"]["wandb_api_key"] == "***"
    for path in tmp_path.rglob("*"):  # the runs, the study's storage: nowhere but the spec itself
        assert not path.is_file() or path.name == "sweep.toml" or key.encode() not in path.read_bytes(), path
