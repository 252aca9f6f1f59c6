"""A stop always ends a XuanCe run resumable (issue 48), with both cores busy and the host's default
grace period: Ctrl-C half-way saves the last completed update and ends the run cancelled, resumable,
and `mosaic resume` completes it, one history. As tests/rllib/test_stop_under_load.py for RLlib.

MOSAIC_STOP_REPEAT=20 runs it 20 times in a row (by hand, without -n: the load is its own)."""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import MOSAIC, events_of, run_args

from mosaic_core.events import metric_steps, one_history
from tests.conftest import ctrl_c_half_way

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # judged under load of their own making

REPEAT = int(os.environ.get("MOSAIC_STOP_REPEAT", "1"))
TOTAL = 6000  # 15 MAPPO updates of 400 steps (4 envs)


def _stopped_half_way(xuance_env, runs: Path, busy_cores) -> tuple[int, str]:
    proc = subprocess.Popen(
        run_args("halt", runs, total=TOTAL),
        env=xuance_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as at a terminal: Ctrl-C signals the group
    )
    err = ctrl_c_half_way(proc, runs / "halt", TOTAL, busy_cores)
    return proc.returncode, err


@pytest.mark.parametrize("attempt", range(REPEAT))
def test_ctrl_c_half_way_under_load_ends_resumable_and_resume_completes(attempt, xuance_env, tmp_path, busy_cores):
    code, err = _stopped_half_way(xuance_env, tmp_path, busy_cores)
    events = events_of(tmp_path / "halt")
    end = events[-1]
    assert code == 130 and end["event"] == "run_cancelled", (end, err[-3000:])
    assert end["payload"]["resumable"] is True and Path(end["payload"]["checkpoint"]).exists(), end
    assert 0 < end["payload"]["from_step"] < TOTAL, end
    assert "Traceback" not in (tmp_path / "halt" / "logs" / "xuance.stderr.log").read_text()

    done = subprocess.run(
        [*MOSAIC, "resume", "halt", "--runs-dir", str(tmp_path), "--json", "--quiet"],
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = events_of(tmp_path / "halt")
    assert events[-1]["event"] == "run_completed", events[-1]
    steps = metric_steps(one_history(events))
    assert steps == sorted(steps) and max(steps) >= TOTAL * 0.9, steps
