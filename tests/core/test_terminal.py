"""At a terminal, ``mosaic run`` talks to people: human lines and a closing summary instead of
JSON (which stays in events.jsonl, and on stdout with --json or when stdout is a pipe)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import time

from tests.conftest import BIN, HOST_VARS

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def run_in_pty(args: list[str], cwd, timeout: float = 240) -> tuple[int, str]:
    """Run ``mosaic ARGS`` with stdout and stderr on a pseudo-terminal of 80 columns."""
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    env.update({"COLUMNS": "80", "LINES": "24", "TERM": "xterm"})
    proc = subprocess.Popen(
        [str(BIN / "mosaic"), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    return proc.wait(timeout=30), ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def test_a_terminal_gets_human_lines_and_a_summary(workdir, runs_root):
    code, out = run_in_pty(
        [
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "2048",
            "--run-id",
            "tty1",
            "--extras",
            json.dumps({"save_model": True, "num_envs": 2, "num_steps": 256}),
        ],
        workdir,
    )
    assert code == 0, out
    assert '{"event"' not in out  # no machine output at a terminal
    assert "run tty1: ppo on CartPole-v1 with cleanrl, 2,048 steps" in out
    assert re.search(r"checkpoint at step \d+: /\S+\.cleanrl_model", out)  # absolute: it can be pasted back
    assert re.search(r"run tty1 completed in [\d.]+ s: step 2,048, return [\d.,]+, [\d,]+ SPS", out)
    assert f"run dir: {runs_root / 'tty1'}" in out
    events = [json.loads(line) for line in (runs_root / "tty1" / "events.jsonl").read_text().splitlines()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_completed"
    saved = next(e for e in events if e["event"] == "checkpoint_saved")
    assert os.path.isabs(saved["payload"]["path"]) and os.path.exists(saved["payload"]["path"])


def test_json_at_a_terminal_on_request(workdir):
    code, out = run_in_pty(
        ["run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "300", "--json", "--quiet"],
        workdir,
    )
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert json.loads(lines[0])["event"] == "run_started" and json.loads(lines[-1])["event"] == "run_completed"


def test_tables_fit_an_80_column_terminal(workdir):
    code, out = run_in_pty(["workers"], workdir)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80, out
