"""Start-up cost of the host CLI: `mosaic workers` and `mosaic --help` next to `python -c pass`.

Run by hand: .venv/bin/python bench/startup.py [--repeat 15] [--compare OTHER_VENV_BIN]
Prints the median wall time of each command and its ratio to a bare interpreter; `--compare`
times the same commands of another installation (e.g. an older checkout) in the same rounds.
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
    parser.add_argument("--compare", type=Path, help="another installation's bin folder")
    args = parser.parse_args()
    cases = {"python -c pass": [sys.executable, "-c", "pass"]}
    for label, bin_dir in (("", BIN), ("compare: ", args.compare)):
        if bin_dir is None:
            continue
        mosaic = str(bin_dir / "mosaic")
        cases.update({
            f"{label}mosaic --help": [mosaic, "--help"],
            f"{label}mosaic workers": [mosaic, "workers"],
            f"{label}mosaic workers --json": [mosaic, "workers", "--json"],
            f"{label}mosaic run --dry-run (ppo)": [mosaic, "run", "--worker", "cleanrl", "--algo", "ppo", "--env-id",
                                                   "CartPole-v1", "--total-timesteps", "1000", "--dry-run"],
        })
    # interleave the cases round by round so machine noise hits them alike
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, cmd in cases.items():
            results[name].append(median_wall(cmd, 1))
    base = statistics.median(results["python -c pass"])
    print(f"{'command':42} {'median s':>9} {'x python':>9}")
    for name, times in results.items():
        med = statistics.median(times)
        print(f"{name:42} {med:9.3f} {med / base:9.2f}")


if __name__ == "__main__":
    main()
