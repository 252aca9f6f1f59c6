"""The PostgreSQL path against a real throwaway server: Debian's `postgresql` binaries, a
cluster made by initdb in a temp dir and run as the second user (postgres refuses root),
listening on 127.0.0.1 only. Skips, saying why, when the binaries are not installed."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.sweep.conftest import load, optuna, processes_in, sweep, write_spec

pytest.importorskip("psycopg", reason="psycopg (the [sweep] extra) is not installed")
pytestmark = pytest.mark.slow  # trains (ppo, tiny budgets)
NOBODY = 65534
PASSWORD = "s3cret-pw"


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_nobody(*argv: str) -> list[str]:
    if os.geteuid() != 0:
        return list(argv)
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    initdb, postgres = _bin("initdb"), _bin("postgres")
    if not initdb or not postgres:
        pytest.skip(
            "PostgreSQL server binaries not found (apt-get install postgresql); the postgresql:// "
            "storage path is not tested here"
        )
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot start postgres as an unprivileged user")
    home = Path(tempfile.mkdtemp(prefix="mosaic-pg-"))
    data, sockets = home / "data", home / "sockets"
    sockets.mkdir()
    (home / "pw").write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        for path in (home, sockets, home / "pw"):
            os.chown(path, NOBODY, NOBODY)
    subprocess.run(
        _as_nobody(
            initdb,
            "-D",
            str(data),
            "-U",
            "sweeper",
            f"--pwfile={home / 'pw'}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = _free_port()
    server = subprocess.Popen(
        _as_nobody(
            postgres, "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(sockets), "-c", "fsync=off"
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.2)
        time.sleep(0.5)  # accepting TCP before it accepts logins
        yield f"postgresql://sweeper:{PASSWORD}@127.0.0.1:{port}/postgres"
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown: clients disconnected, no wait
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(home, ignore_errors=True)


def test_two_sweep_processes_on_a_postgresql_study(tmp_path, postgres_url):
    spec = write_spec(tmp_path)
    result = sweep(["run", str(spec), "--parallel", "2", "--max-trials", "2", "--storage", postgres_url], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stderr + result.stdout
    trials = load("tiny", postgres_url).get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert len({t.params["learning_rate"] for t in trials}) == 2
    assert len({t.user_attrs["process"] for t in trials}) == 2
    root = tmp_path / "var/trainer/runs"
    text = (root / trials[0].user_attrs["runs"][0] / "manifest.json").read_text()
    assert "sweeper:***@127.0.0.1" in text and PASSWORD not in text
    status = sweep(["status", "tiny", "--storage", postgres_url], cwd=tmp_path)
    assert status.returncode == 0 and "trials: 2 complete" in status.stdout and PASSWORD not in status.stdout
    assert not (tmp_path / "var/sweeps").exists() and processes_in(tmp_path) == []


def test_a_wrong_password_is_one_line_naming_the_redacted_url(tmp_path, postgres_url):
    spec = write_spec(tmp_path)
    wrong = postgres_url.replace(PASSWORD, "not-the-password")
    result = sweep(["run", str(spec), "--storage", wrong], cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "storage postgresql://sweeper:***@127.0.0.1" in result.stderr and "not-the-password" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]
