"""Issue 30, parts 2 and 5, as another local user (uid 65534, ``setpriv``) would attack:

* a planted ``var/trainer/runs`` in a folder everyone can write (``/tmp``), with a process that
  swaps every new run directory in it for a link to the attacker's folder, which holds a
  ``cleanrl_worker/launch.py`` of its own (this ran as the owner 4 times out of 4 before);
* that root named outright (``--runs-dir``, ``$MOSAIC_RUNS_DIR``): refused in one line naming
  the path and its owner;
* the training process's ``sys.path`` never holds its run directory (``PYTHONSAFEPATH``);
* a run's files are private (0700/0600): the other user reads nothing;
* a FIFO named ``config.json``/``events.jsonl`` hangs no reader, a link in ``logs/`` is not
  followed, and terminal escapes in ``events.jsonl`` never reach the terminal raw.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, run_cli
from tests.trainer.second_user import AS_NOBODY, needs_second_user, run_as_nobody

TINY = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "256", "--quiet"]

# The attacker: plants a runs root and a payload package, then swaps every new run directory
# under the root for a link to the payload's folder until told to stop.
SWAPPER = r"""
import os, sys, time
shared = sys.argv[1]
root = os.path.join(shared, "var", "trainer", "runs")
os.makedirs(root)
for folder in ("var", "var/trainer", "var/trainer/runs"):
    os.chmod(os.path.join(shared, folder), 0o777)
evil = os.path.join(shared, "evil")
os.makedirs(os.path.join(evil, "cleanrl_worker"))
marker = os.path.join(shared, "pwned")
for name in ("__init__.py", "launch.py"):
    with open(os.path.join(evil, "cleanrl_worker", name), "w") as f:
        f.write(f"open({marker!r}, 'w').write('ran as uid %d' % __import__('os').getuid())\n")
os.chmod(evil, 0o777)
print("planted", flush=True)
deadline = time.time() + 240
while time.time() < deadline and not os.path.exists(os.path.join(shared, "stop")):
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not os.path.islink(path):
            try:
                os.rename(path, os.path.join(shared, "stolen-" + name))
                os.symlink(evil, path)
            except OSError:
                pass
    time.sleep(0.005)
"""


@pytest.fixture
def shared() -> Path:
    """A folder like /tmp: root's, sticky, writable by everyone."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _one_line_refusal(result, *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@needs_second_user
def test_a_planted_runs_root_is_never_found_nor_accepted(shared):
    attacker = subprocess.Popen(
        [*AS_NOBODY, sys.executable, "-c", SWAPPER, str(shared)],
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert attacker.stdout.readline().strip() == "planted", attacker.stderr.read()
        planted = shared / "var" / "trainer" / "runs"
        project = shared / "project"
        project.mkdir()
        project.chmod(0o755)
        # Started below the planted root: the upward search stops at `shared` (others can write
        # it), so the run makes a root of the owner's own in the project, and says so.
        result = run_cli(TINY, cwd=project)
        assert result.returncode == 0, result.stderr
        own_root = project / "var" / "trainer" / "runs"
        assert f"made a new runs root {own_root}" in result.stderr
        assert len(list(own_root.iterdir())) == 1 and os.listdir(planted) == []
        # Named outright, the planted root is refused in one line naming it and its owner.
        for how in (["--runs-dir", str(planted)], []):
            env = {} if how else {"MOSAIC_RUNS_DIR": str(planted)}
            _one_line_refusal(run_cli([*TINY, *how], cwd=project, env=env), str(planted), "nobody")
            _one_line_refusal(run_cli(["runs", *how], cwd=project, env=env), str(planted), "nobody")
        assert os.listdir(planted) == []
    finally:
        (shared / "stop").touch()
        attacker.wait(timeout=30)
    assert not (shared / "pwned").exists(), (shared / "pwned").read_text()
    assert not list(shared.glob("stolen-*"))


def _training_process(run_dir: Path, timeout: float = 120) -> int:
    """The pid of the process whose working directory is ``run_dir`` (the training process),
    once it runs the worker's program: between fork and exec the host's child already has that
    working directory but still the host's command line and environment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if (
                    os.readlink(f"/proc/{pid}/cwd") == str(run_dir)
                    and b"cleanrl_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
                ):
                    return int(pid)
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"no training process in {run_dir}")


@needs_second_user
def test_run_files_are_private_and_the_run_directory_is_off_sys_path(shared):
    project = shared / "project"
    project.mkdir()
    project.chmod(0o755)
    host = subprocess.Popen(
        [str(BIN / "mosaic"), *TINY[:-2], "400000", "--quiet", "--run-id", "private-run"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = project / "var" / "trainer" / "runs" / "private-run"
    try:
        pid = _training_process(run_dir)
        environ = dict(
            item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item
        )
        assert environ[b"PYTHONSAFEPATH"] == b"1"
        # What that buys: a package planted in the working directory is not what gets imported.
        decoy = shared / "decoy"
        (decoy / "cleanrl_worker").mkdir(parents=True)
        marker = shared / "decoy-imported"
        (decoy / "cleanrl_worker" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
        env = {k.decode(): v.decode() for k, v in environ.items()}
        for safe, imported in (("1", False), ("", True)):  # without it, the decoy wins: the test can fail
            subprocess.run(
                [sys.executable, "-c", "import cleanrl_worker"],
                cwd=decoy,
                check=True,
                timeout=60,
                env={**env, "PYTHONSAFEPATH": safe},
            )
            assert marker.exists() is imported
            marker.unlink(missing_ok=True)
    finally:
        host.send_signal(signal.SIGINT)
        host.wait(timeout=120)
    modes = {path.relative_to(run_dir): stat.S_IMODE(path.lstat().st_mode) for path in [run_dir, *run_dir.rglob("*")]}
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes
    assert stat.S_IMODE((project / "var" / "trainer" / "runs").stat().st_mode) == 0o700
    reader = run_as_nobody(
        [
            sys.executable,
            "-c",
            "import sys\nfor p in sys.argv[1:]:\n"
            "    try: open(p).read(); print('READ', p)\n    except OSError as e: print(e.errno, p)",
            str(run_dir / "config.json"),
            str(run_dir / "events.jsonl"),
            str(run_dir / "logs" / "cleanrl.stderr.log"),
        ]
    )
    assert "READ" not in reader.stdout and reader.stdout.count("13 ") == 3, reader.stdout


def test_group_sharing_is_an_opt_in(tmp_path):
    result = run_cli(TINY, cwd=tmp_path, env={"MOSAIC_SHARE_RUNS": "group"})
    assert result.returncode == 0, result.stderr
    run_dir = next((tmp_path / "var" / "trainer" / "runs").iterdir())
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o750
    assert stat.S_IMODE((run_dir / "config.json").stat().st_mode) == 0o640


def test_fifos_links_and_escapes_in_a_run_directory(tmp_path):
    result = run_cli(TINY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = tmp_path / "var" / "trainer" / "runs"
    good = next(root.iterdir())
    # A second run directory whose files are a FIFO and a link to a root-only file.
    secret = tmp_path / "secret.txt"
    secret.write_text("root-only secret\n")
    secret.chmod(0o600)
    bad = root / "planted"
    (bad / "logs").mkdir(parents=True)
    os.mkfifo(bad / "config.json")
    os.mkfifo(bad / "events.jsonl")
    os.symlink(secret, bad / "logs" / "secret.log")
    os.symlink(secret, good / "logs" / "secret.log")
    # Escapes in the good run's events (a title change and a screen clear).
    lines = (good / "events.jsonl").read_text().splitlines(keepends=True)
    note = (
        json.dumps(
            {
                "event": "note",
                "timestamp": time.time(),
                "run_id": good.name,
                "payload": {"text": "\x1b]0;pwned\x07\x1b[2Jcleared\rfake line"},
            }
        )
        + "\n"
    )
    (good / "events.jsonl").write_text("".join([lines[0], note, *lines[1:]]))
    listing = run_cli(["runs"], cwd=tmp_path, timeout=60)  # a FIFO would hang it: the timeout fails the test
    assert listing.returncode == 0, listing.stderr
    assert good.name in listing.stdout and "\x1b" not in listing.stdout
    logs = run_cli(["logs", good.name], cwd=tmp_path, timeout=60)
    assert logs.returncode == 0 and "cleared?fake line" in logs.stdout, logs.stdout
    assert "\x1b" not in logs.stdout and "\x07" not in logs.stdout and "\r" not in logs.stdout
    refused = run_cli(["logs", "planted"], cwd=tmp_path, timeout=60)
    assert refused.returncode != 0 and "not a regular file" in refused.stderr and "Traceback" not in refused.stderr
    from mosaic_dashboard import rundata

    assert "root-only secret" not in json.dumps(rundata.log_tails(good))
    assert rundata.read_json(bad / "config.json") is None  # returns at once
