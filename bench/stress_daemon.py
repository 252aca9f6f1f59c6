"""Stress loop: the daemon's end-to-end tests again and again, under whatever load the machine has,
counting passes and any training process killed by a signal (the SIGABRT that gRPC's fork handlers
caused when the host forked with live channels and a ``preexec_fn``).

Run by hand: .venv/bin/python bench/stress_daemon.py [--repeat 30] [--tests tests/trainer/test_end_to_end.py]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--tests", default="tests/trainer/test_end_to_end.py")
    parser.add_argument("-k", default="", help="pytest -k expression")
    args = parser.parse_args()
    passed = failed = aborted = 0
    started = time.perf_counter()
    for round_ in range(1, args.repeat + 1):
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", args.tests]
        if args.k:
            command += ["-k", args.k]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        ok = done.returncode == 0
        passed += ok
        failed += not ok
        aborted += "killed by signal" in done.stdout + done.stderr
        tail = "" if ok else " | " + (done.stdout.strip().splitlines() or [""])[-1]
        print(f"round {round_}/{args.repeat}: {'pass' if ok else 'FAIL'}{tail}", flush=True)
    load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"{passed} passed, {failed} failed ({aborted} with a process killed by a signal) in "
        f"{time.perf_counter() - started:.0f} s; load average at the end {load}"
    )


if __name__ == "__main__":
    main()
