"""The same work on two venvs built on different interpreters (pyenv's python3.11, Debian's), side by side.

Run by hand: .venv/bin/python bench/interpreter.py --other OTHER_VENV/bin [--repeat 5]
Both venvs need the host installed (``make venv PYTHON=... VENV=...``). Prints, per case, the median
CPU time (user + system, the process and what it waited for) on each and their ratio. The cases
run round by round, interleaved, so the machine's noise hits both alike. CI's lanes are CPU-bound,
so this ratio is about what the interpreter does to CI's time (.ci/run picks the faster one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TRAINING_START = (
    "import torch; m = torch.nn.Linear(4, 2); o = torch.optim.Adam(m.parameters()); "
    "m(torch.ones(3, 4)).sum().backward(); o.step()"
)
PURE_PYTHON = "d = {}\nfor i in range(2_000_000): d[i % 1000] = d.get(i % 1000, 0) + i"


def cases(bin_dir: Path) -> dict[str, list[str]]:
    python, mosaic = str(bin_dir / "python"), str(bin_dir / "mosaic")
    return {
        "pure Python loop": [python, "-I", "-c", PURE_PYTHON],
        "a training process's start (torch, one Adam step)": [python, "-I", "-c", TRAINING_START],
        "mosaic --help": [mosaic, "--help"],
        "mosaic run: PPO on CartPole, 2,048 steps": [
            *(mosaic, "run", "--worker", "cleanrl", "--algo", "ppo"),
            *("--env-id", "CartPole-v1", "--total-timesteps", "2048"),
        ],
    }


def cpu_seconds(cmd: list[str], cwd: str) -> float:
    """User + system CPU of ``cmd`` and the descendants it waited for."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    _pid, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-1000:] if proc.stderr else ''}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, required=True, help="the other venv's bin folder")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sides = {"this": Path(sys.executable).parent, "other": args.other}
    for side, bin_dir in sides.items():
        home = (bin_dir.parent / "pyvenv.cfg").read_text().split("home = ", 1)[-1].split("\n", 1)[0]
        print(f"{side}: {bin_dir} (built on {home})")
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeat):
            for side, bin_dir in sides.items():
                for case, cmd in cases(bin_dir).items():
                    times.setdefault((case, side), []).append(cpu_seconds(cmd, cwd))
    print(f"\n{'case':<52}{'this':>8}{'other':>8}{'other/this':>12}   (median CPU-s of {args.repeat})")
    for case in cases(sides["this"]):
        this, other = (statistics.median(times[case, side]) for side in sides)
        print(f"{case:<52}{this:>8.3f}{other:>8.3f}{other / this:>12.2f}")


if __name__ == "__main__":
    main()
