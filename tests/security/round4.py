"""Shared by the round-four security tests (issue 47): runs another local user forged (uid 65534
writes the archive, the owner imports it), the real CLI under a memory cap, and one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import BIN, HOST_VARS, run_cli
from tests.security.test_imports import forge

EXAMPLE = {"worker": "example", "algo": "random", "env_id": "CartPole-v1"}  # a worker that trains in seconds


def event(name: str, run_id: str, seq: int, payload: dict, timestamp: float | None = None) -> str:
    record = {"event": name, "run_id": run_id, "seq": seq, "timestamp": timestamp or time.time(), "payload": payload}
    return json.dumps(record)


def imported_run(shared: Path, root: Path, cwd: Path, run_id: str, files: dict[str, str | bytes]) -> Path:
    """The attacker (uid 65534) packs ``files`` as run ``run_id``; the owner imports it under ``root``."""
    archive = forge(
        shared, f"{run_id}.tar.gz", run_id, [[f"{run_id}/{rel}", "file", d] for rel, d in files.items()], files
    )
    done = mosaic(cwd, "runs", "import", str(archive), "--runs-dir", str(root))
    assert done.returncode == 0 and f"mosaic runs trust {run_id}" in done.stderr, done.stderr
    return root / run_id


def mosaic(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300):
    return run_cli(list(args), cwd=cwd, env={"MOSAIC_RUNS_DIR": "", **(env or {})}, timeout=timeout)


def one_line(result, *words: str) -> str:
    """The one stderr line of a refusal (exit 2, no traceback), holding each of ``words``."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr and "internal error" not in lines[0], result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# Runs ``mosaic ARGS`` forked from a small interpreter (a child of pytest would count pytest's own
# memory as its peak), under RLIMIT_AS when given, and reports (exit code, its peak RSS).
CAPPED = (
    "import os, resource, sys\n"
    "limit, out = int(sys.argv[1]), sys.argv[2]\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    if limit: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "    os.execv(sys.argv[3], sys.argv[3:])\n"
    "_pid, status, usage = os.wait4(pid, 0)\n"
    "open(out, 'w').write(str(usage.ru_maxrss * 1024))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))"
)


def capped(cwd: Path, args: list[str], address_space: int = 0, timeout: float = 300):
    """``mosaic ARGS`` under ``address_space`` bytes of RLIMIT_AS (0: none): (CompletedProcess, peak RSS)."""
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    peak = cwd / f"peak-{time.monotonic_ns()}"
    done = subprocess.run(
        [sys.executable, "-c", CAPPED, str(address_space), str(peak), str(BIN / "mosaic"), *args],
        cwd=cwd,
        env={**env, "MOSAIC_RUNS_DIR": ""},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, int(peak.read_text())
