"""Listing runs reads each run's files within caps (mosaic_core.runstore.summary): a 1 GiB
one-line ``events.jsonl``, a 1 GiB line between good ones and a 1 GiB ``config.json`` (sparse
files: cheap to make, gigabytes to read) leave ``mosaic runs`` correct, run under an address
space limit far below the files' size, and peaking at a small resident size (the kernel's own
accounting of the process, from ``wait4``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from mosaic_core.runstore import summary
from mosaic_core.runstore.summary import summarize
from tests.conftest import BIN, HOST_VARS

GIB = 1 << 30
ADDRESS_SPACE = 512 << 20  # far below one of the files: a whole read of one cannot fit
PEAK_RSS = 200 << 20


def event(name: str, seq: int, payload: dict) -> bytes:
    return json.dumps({"event": name, "run_id": "x", "seq": seq, "timestamp": time.time(), "payload": payload}).encode()


def sparse(path, head: bytes = b"", size: int = GIB, tail: bytes = b"") -> None:
    """``head``, a hole up to ``size`` bytes (NULs, no newline: one line), then ``tail``."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
        handle.seek(size)
        handle.write(tail)


def hostile_root(root):
    good = root / "good"
    good.mkdir(parents=True)
    (good / "config.json").write_text(
        json.dumps({"worker": "cleanrl", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000})
    )
    (good / "events.jsonl").write_bytes(
        event("run_started", 1, {})
        + b"\n"
        + event("metrics", 2, {"global_step": 500})
        + b"\n"
        + event("run_completed", 3, {})
        + b"\n"
    )
    (root / "one-line").mkdir()
    sparse(root / "one-line" / "events.jsonl")  # 1 GiB, no newline at all
    (root / "long-line").mkdir()
    (root / "long-line" / "config.json").write_text(json.dumps({"algo": "dqn", "env_id": "Acrobot-v1"}))
    sparse(
        root / "long-line" / "events.jsonl",
        event("run_started", 1, {"worker": "cleanrl"}) + b"\n",
        tail=b"\n" + event("metrics", 3, {"global_step": 42, "episodic_return": 7.5}) + b"\n",
    )
    (root / "big-config").mkdir()
    sparse(root / "big-config" / "config.json", b'{"algo": "')
    (root / "big-config" / "events.jsonl").write_bytes(event("run_started", 1, {"algo": "sac"}) + b"\n")


def mosaic_runs_bounded(root, cwd, *args: str) -> tuple[int, str, str, int]:
    """``mosaic runs --json`` (or ``mosaic ARGS --runs-dir ROOT``) under RLIMIT_AS; (exit code,
    stdout, stderr, peak RSS in bytes). A small interpreter forks it and reports its peak: a
    process's peak RSS counts the memory of the process it was forked from at exec, which for a
    child of pytest is pytest's own (hundreds of MiB once tests have imported torch)."""
    args = args or ("runs", "--json")
    limit = (
        "import os, resource, sys\n"
        "pid = os.fork()\n"
        f"if pid == 0: resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE})); "
        "os.execv(sys.argv[2], sys.argv[2:])\n"
        "_pid, status, usage = os.wait4(pid, 0)\n"
        "open(sys.argv[1], 'w').write(str(usage.ru_maxrss * 1024))\n"
        "sys.exit(os.waitstatus_to_exitcode(status))"
    )
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    peak = cwd / "peak-rss"
    proc = subprocess.run(
        [sys.executable, "-c", limit, str(peak), str(BIN / "mosaic"), *args, "--runs-dir", str(root)],
        cwd=cwd,
        env=env,
        capture_output=True,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode(), int(peak.read_text())


def test_mosaic_runs_stays_correct_and_small_beside_gigabyte_files(tmp_path):
    root = tmp_path / "runs"
    hostile_root(root)
    for attempt in (1, 2):  # the second listing goes through the index, re-reading the unsettled runs
        code, out, err, peak = mosaic_runs_bounded(root, tmp_path)
        assert code == 0, err
        assert peak < PEAK_RSS, f"listing {attempt} peaked at {peak >> 20} MiB"
        by_id = {r["run_id"]: r for r in json.loads(out)}
        assert set(by_id) == {"good", "one-line", "long-line", "big-config"}
        assert (by_id["good"]["status"], by_id["good"]["global_step"]) == ("completed", 500)
        long_line = by_id["long-line"]
        assert (long_line["status"], long_line["global_step"], long_line["last_return"]) == ("running", 42, 7.5)
        assert (long_line["worker"], long_line["algo"], long_line["started_at"] is not None) == ("cleanrl", "dqn", True)
        assert by_id["big-config"]["algo"] == "sac"
        assert any("config.json: 1.0G, over the 4.0M a listing reads" in p for p in by_id["big-config"]["problems"])


def test_an_over_long_line_is_skipped_without_being_read_whole(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    long_first = b'{"event": "run_started", "payload": {"pad": "' + b"x" * summary.MAX_LINE_BYTES + b'"}}\n'
    (run / "events.jsonl").write_bytes(long_first + event("metrics", 2, {"global_step": 9}) + b"\n")
    found = summarize(run)
    assert found.global_step == 9 and found.started_at is None  # the first line was over the cap: skipped


def test_an_unchanged_log_is_not_parsed_again(tmp_path):
    root = tmp_path / "runs"
    hostile_root(root)
    path = root / "long-line" / "events.jsonl"
    parsed = summary._events(path)
    assert summary._events(path) is parsed  # same (device, inode, size, mtime): the parse is kept
    assert summarize(root / "long-line").status == "running"
    with open(path, "ab") as handle:
        handle.write(event("run_completed", 4, {}) + b"\n")
    assert summary._events(path) is not parsed
    assert summarize(root / "long-line").status == "completed"


def test_runs_show_and_logs_read_a_gigabyte_run_within_bounds(tmp_path):
    """What reads one run whole (``mosaic logs``, ``mosaic runs show``) holds no more than a
    line's cap: the 1 GiB line is skipped as it streams by, the 1 GiB config is not read."""
    root = tmp_path / "runs"
    hostile_root(root)
    code, out, err, peak = mosaic_runs_bounded(root, tmp_path, "logs", "long-line")
    assert code == 0 and peak < PEAK_RSS, (err, peak >> 20)
    assert [line.split()[1] for line in out.splitlines()] == ["run_started", "metrics"]
    assert "step 42" in out.splitlines()[1]
    code, out, err, peak = mosaic_runs_bounded(root, tmp_path, "runs", "show", "big-config")
    assert code == 0 and peak < PEAK_RSS, (err, peak >> 20)
    assert "algo:            sac" in out and "over the 4.0M a listing reads" in out


def test_the_table_names_each_run_it_could_not_read_whole_in_one_line(tmp_path):
    root = tmp_path / "runs"
    hostile_root(root)
    (root / "corrupt").mkdir()
    (root / "corrupt" / "config.json").write_text('{"worker": "cleanrl", "algo": ')
    for attempt in (1, 2):  # the second through the index: the problems are part of the kept summary
        code, out, err, peak = mosaic_runs_bounded(root, tmp_path, "runs")
        assert code == 0 and peak < PEAK_RSS, (err, peak >> 20)
        assert {line.split()[0] for line in out.splitlines()[1:]} == {
            "good",
            "one-line",
            "long-line",
            "big-config",
            "corrupt",
        }
        assert err.splitlines() == [
            "mosaic: run corrupt: config.json: not valid JSON (line 1)",
            "mosaic: run big-config: config.json: 1.0G, over the 4.0M a listing reads; not read",
        ], attempt
