"""At a terminal, ``mosaic run`` talks to people: human lines and a closing summary instead of
JSON (which stays in events.jsonl, and on stdout with --json or when stdout is a pipe)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import time

import pytest

from tests.conftest import BIN, HOST_VARS, run_cli

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


def tensorboard(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's TensorBoard folder, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = {p.parent for p in (run_dir / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


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
    assert re.search(r"run tty1 completed in [\d.]+ s: step 2,048, [\d,]+ SPS", out)
    assert f"run dir: {runs_root / 'tty1'}" in out
    # the score, named as `mosaic runs` names it: CleanRL's evaluation of the model it saved
    recorded = tensorboard(runs_root / "tty1")
    evaluated = [value for _step, value in recorded["eval/episodic_return"]]
    (evaluation,) = (runs_root / "tty1" / "evaluations").glob("saved-model-*/eval.json")
    assert json.loads(evaluation.read_text())["mean"] == pytest.approx(sum(evaluated) / 10)
    score = f"{sum(evaluated) / 10:.2f} eval"
    assert f"evaluation at step 2,048: 10 episodes, mean return {sum(evaluated) / 10:,.2f}" in out
    assert f"  score: {score} (the final evaluation's mean return: 10 episodes, step 2,048)" in out
    listed = run_cli(["runs", "--runs-dir", str(runs_root)], cwd=workdir)
    assert re.search(rf"tty1 .* {score} ", listed.stdout), listed.stdout
    # any other figure is labelled: the moving average of exactly the last (up to 100) episodes
    returns = [value for _step, value in recorded["charts/episodic_return"]][-100:]
    average = f"{sum(returns) / len(returns):,.2f}"
    assert f"  moving average of the last {len(returns)} episodes: {average}" in out, out[-1500:]
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


def test_a_resumed_runs_moving_average_covers_both_attempts(workdir, runs_root):
    """Stopped at about 3/4 and resumed: the moving average of the last 100 episodes is of the
    run's last 100 episodes (TensorBoard's one history, both attempts), from the resume's first
    metrics on (it does not start afresh), and the closing summary says so."""
    import signal
    import subprocess

    extras = {"num_envs": 2, "num_steps": 128, "metrics_interval_s": 0.1, "save_model": False}
    args = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "16384"]
    args += ["--run-id", "again", "--runs-dir", str(runs_root), "--extras", json.dumps(extras), "--quiet"]
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    process = subprocess.Popen([str(BIN / "mosaic"), *args], cwd=workdir, env=env, stderr=subprocess.PIPE, text=True)
    log = runs_root / "again" / "events.jsonl"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        steps = [e["payload"].get("global_step", 0) for e in _events(log) if e["event"] == "metrics"]
        if steps and max(steps) >= 12_000:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=120)
    stopped = _events(log)[-1]
    assert stopped["event"] == "run_cancelled" and stopped["payload"].get("resumable") is True, err[-2000:]
    from_step = stopped["payload"]["from_step"]

    code, out = run_in_pty(["resume", "again", "--runs-dir", str(runs_root)], workdir)
    assert code == 0, out[-3000:]
    episodes = tensorboard(runs_root / "again")["charts/episodic_return"]  # one history: the purge applied
    before = [value for step, value in episodes if step <= from_step]
    after = [value for step, value in episodes if step > from_step]
    assert 0 < len(after) < 100 <= len(before)  # the last 100 episodes span both attempts
    last = [value for _step, value in episodes[-100:]]
    manifest = json.loads((runs_root / "again" / "manifest.json").read_text())["metrics"]
    assert manifest["smoothed_episodes"] == 100 and manifest["episodes"] == len(episodes)
    assert manifest["episodic_return_smoothed"] == pytest.approx(sum(last) / 100)
    assert f"  moving average of the last 100 episodes: {sum(last) / 100:,.2f}" in out, out[-1500:]
    events = _events(log)
    resumed = next(i for i, e in enumerate(events) if e["event"] == "run_resumed")
    first = next(e["payload"] for e in events[resumed:] if e["event"] == "metrics")
    assert first["global_step"] >= from_step and first["episodes"] >= len(before)  # goes on, no jump back
    assert first["smoothed_episodes"] == 100  # the window is full at once: the earlier attempt's episodes


def _events(path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
