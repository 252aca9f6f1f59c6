"""A CleanRL training process's CPU with and without ``mosaic_core.child.preload`` (torch imported with
the cyclic garbage collector paused, then frozen), side by side.

Run by hand: .venv/bin/python bench/startup_gc.py [--repeat 5] [--steps 2048]
Each round runs four cases, interleaved so the machine's noise hits them alike: torch's import, and
the bundled ppo on CartPole-v1 (the script by itself, as upstream CleanRL runs one), each as it is and
after ``preload`` (what ``cleanrl_worker.launch`` does first). Prints the median CPU-s (user + system)
of each and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from interpreter import cpu_seconds  # bench/interpreter.py (bench/ is first on sys.path)

import cleanrl_worker

SCRIPT = Path(cleanrl_worker.__file__).parent / "algorithms" / "ppo.py"
RUN = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
PRELOAD = "from mosaic_core.child import preload; preload('torch', 'torch._dynamo'); "
IMPORT = "import torch, torch._dynamo"


def cases(steps: int) -> dict[str, list[str]]:
    script = [str(SCRIPT), "--env-id", "CartPole-v1", "--total-timesteps", str(steps)]
    return {
        "import torch (and dynamo)": ["-c", IMPORT],
        "import torch, preloaded": ["-c", PRELOAD + IMPORT],
        f"ppo on CartPole, {steps} steps": ["-c", RUN, *script],
        f"ppo on CartPole, {steps} steps, preloaded": ["-c", PRELOAD + RUN, *script],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2048)
    args = parser.parse_args()
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeat):
            for case, argv in cases(args.steps).items():
                times.setdefault(case, []).append(cpu_seconds([sys.executable, "-P", *argv], cwd))
    median = {case: statistics.median(values) for case, values in times.items()}
    print(f"{'case':<48}{'CPU-s':>8}   (median of {args.repeat})")
    for case, value in median.items():
        print(f"{case:<48}{value:>8.3f}")
    names = list(median)
    print(
        f"\npreloaded / not: import {median[names[1]] / median[names[0]]:.2f}, run {median[names[3]] / median[names[2]]:.2f}"
    )


if __name__ == "__main__":
    main()
