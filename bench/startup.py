"""Start-up cost of the host CLI: `mosaic workers` and `mosaic --help` next to `python -c pass`.

Run by hand: .venv/bin/python bench/startup.py [--repeat 15]
Prints the median wall time of each command and its ratio to a bare interpreter.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def median_wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "mosaic --help": [str(BIN / "mosaic"), "--help"],
        "mosaic workers": [str(BIN / "mosaic"), "workers"],
        "mosaic workers --json": [str(BIN / "mosaic"), "workers", "--json"],
        "mosaic run --dry-run (ppo)": [str(BIN / "mosaic"), "run", "--worker", "cleanrl", "--algo", "ppo",
                                       "--env-id", "CartPole-v1", "--total-timesteps", "1000", "--dry-run"],
    }
    # interleave the cases round by round so machine noise hits them alike
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, cmd in cases.items():
            results[name].append(median_wall(cmd, 1))
    base = statistics.median(results["python -c pass"])
    print(f"{'command':32} {'median s':>9} {'x python':>9}")
    for name, times in results.items():
        med = statistics.median(times)
        print(f"{name:32} {med:9.3f} {med / base:9.2f}")


if __name__ == "__main__":
    main()
