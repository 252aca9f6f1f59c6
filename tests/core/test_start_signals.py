"""Stopping ``mosaic run`` while it starts (``mosaic_core.hostsignals``): a run signalled before
its run directory exists leaves nothing and says so in one line, exit 128 + the signal; from the
moment the directory exists, the run always ends with a terminal event (``run_cancelled``).

The signal comes at two real moments of a real start: as soon as the host handles SIGTERM (its
start-up guard is in place), and as soon as the run directory appears. Which side of the
directory's making a signal lands on is the machine's business; each outcome must be one of the
two the contract allows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN

SLEEPER = """
import time
from dataclasses import dataclass
import tyro

@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 10
    seed: int = 1

tyro.cli(Args)
time.sleep(300)
"""


def handles(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (``/proc/<pid>/status``: SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (sig - 1) & 1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("moment", ["guarded", "directory"])
def test_a_run_signalled_while_it_starts_leaves_nothing_or_a_terminal_event(workdir, runs_root, moment, sig):
    (workdir / "sleeper.py").write_text(SLEEPER)
    host = subprocess.Popen(
        [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "sleeper.py",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "10",
            "--run-id",
            "r",
            "--json",
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = runs_root / "r"
    try:
        deadline = time.monotonic() + 120
        while not (handles(host.pid, signal.SIGTERM) if moment == "guarded" else run_dir.exists()):
            assert host.poll() is None and time.monotonic() < deadline, host.communicate()
            time.sleep(0.005)
        host.send_signal(sig)
        out, err = host.communicate(timeout=120)
    finally:
        if host.poll() is None:
            host.kill()
    assert "Traceback" not in err
    if not run_dir.exists():
        assert host.returncode == 128 + sig and out == "", (host.returncode, out[-2000:], err[-3000:])
        assert err.splitlines() == [f"mosaic: stopped by {sig.name} before the run started; nothing was written"]
        return
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    ends = [e for e in events if e["event"] in ("run_completed", "run_failed", "run_cancelled")]
    assert host.returncode == 130 and len(ends) == 1 and events[-1] is ends[0] and ends[0]["event"] == "run_cancelled"
    assert sig.name in ends[0]["payload"]["reason"]


class _SignalsWhenCollected:
    """Sends this process ``sig`` from its ``__del__``: the handler runs there, where Python prints
    and drops an exception (as in the import system's module-lock weakref callback, where a CI run
    lost a SIGTERM and the run started anyway)."""

    def __init__(self, sig: signal.Signals):
        self.sig = sig

    def __del__(self) -> None:
        os.kill(os.getpid(), self.sig)
        for _ in range(3):  # a few bytecodes here: the handler runs inside this __del__
            pass


@pytest.mark.parametrize("until", ["hold", "the end"])
def test_a_stop_whose_exception_python_dropped_still_ends_the_start(until, capsys):
    from mosaic_core import hostsignals

    went_on = False
    with pytest.raises(hostsignals.StoppedBeforeStart) as stopped:
        with hostsignals.guarded():
            _SignalsWhenCollected(signal.SIGTERM)  # collected at once
            went_on = True  # the exception raised in __del__ was dropped: the start goes on, as in CI
            if until == "hold":
                hostsignals.hold()  # the run directory is about to be made: not now
                raise AssertionError("hold() let a stopped start make its run directory")
    assert went_on and stopped.value.signum == signal.SIGTERM
    assert capsys.readouterr().err == ""  # no "Exception ignored in" traceback either


class _SignalsWhenNamed:
    """A class attribute that sends this process ``sig`` from its ``__set_name__``, as the class
    statement runs: the handler runs there, and Python 3.11 reports its exception as a RuntimeError
    caused by it (a CI run's SIGINT, landing as a dataclass was made while `mosaic run` imported a
    module, ended as an internal error)."""

    def __init__(self, sig: signal.Signals):
        self.sig = sig

    def __set_name__(self, owner: type, name: str) -> None:
        os.kill(os.getpid(), self.sig)
        for _ in range(3):  # a few bytecodes here: the handler runs inside this __set_name__
            pass


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_while_a_class_is_made_is_a_stop_not_an_internal_error(sig, capsys):
    from mosaic_core import hostsignals
    from mosaic_core.cli.errors import run_cli_command

    def start() -> int:
        with hostsignals.guarded():

            class Settings:  # as a module's class is made when it is imported
                field = _SignalsWhenNamed(sig)

            raise AssertionError("the start went on after its stop")

    assert run_cli_command(start) == 128 + sig
    assert capsys.readouterr().err.splitlines() == [
        f"mosaic: stopped by {sig.name} before the run started; nothing was written"
    ]
