"""A failed run says why, in one line: the exception that ended the process, not the last warning."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mosaic_core.failures import failure_reason

CHAINED = """\
Traceback (most recent call last):
  File "a.py", line 3, in <module>
    open("x")
FileNotFoundError: [Errno 2] No such file or directory: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 5, in <module>
    raise gym.error.DependencyNotInstalled("moviepy is not installed")
gymnasium.error.DependencyNotInstalled: moviepy is not installed, run `pip install moviepy`
/venv/gymnasium/wrappers/record_video.py:190: UserWarning: WARN: Unable to save last video! Did you call close()?
  logger.warn("Unable to save last video! Did you call close()?")
"""


def test_the_fatal_exception_wins_over_a_later_warning():
    assert failure_reason(CHAINED.splitlines()) == (
        "gymnasium.error.DependencyNotInstalled: moviepy is not installed, run `pip install moviepy`"
    )


def test_without_a_traceback_the_last_error_looking_line():
    lines = ["step 1", "RuntimeError-ish: CUDA error: out of memory", "WARNING: retrying", "bye"]
    assert failure_reason(lines) == "RuntimeError-ish: CUDA error: out of memory"
    assert failure_reason(["just", "words"]) == "words"
    assert failure_reason(["", "  "]) is None
    assert (
        failure_reason(["Traceback (most recent call last):", '  File "x"', "KeyboardInterrupt"]) == "KeyboardInterrupt"
    )


@given(st.lists(st.text(max_size=40), max_size=30))
def test_any_stderr_gives_one_of_its_lines_or_none(lines):
    reason = failure_reason(lines)
    assert reason is None or reason in {line.strip() for line in lines}


def test_a_failed_run_prints_its_reason_on_stderr(mosaic, workdir):
    (workdir / "boom.py").write_text("import warnings\nraise ValueError('bad learning rate: -1')\n")
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "boom.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--run-id",
        "boom",
    )
    assert result.returncode == 1
    assert result.events[-1]["payload"]["error"] == "ValueError: bad learning rate: -1"
    assert "mosaic: error: run boom failed: ValueError: bad learning rate: -1" in result.stderr
    shown = mosaic("runs", "show", "boom")
    assert "reason:          ValueError: bad learning rate: -1" in shown.stdout
    quiet = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "boom.py",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--quiet",
    )
    assert quiet.stderr.splitlines()[-1].endswith("failed: ValueError: bad learning rate: -1")  # --quiet says why too
