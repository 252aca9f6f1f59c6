"""Start-up cost of the host CLI: `mosaic workers` and `mosaic --help` next to `python -c pass`.

Run by hand: .venv/bin/python bench/startup.py [--repeat 15] [--compare-source OLD_TREE] [--compare OTHER_VENV_BIN]
Prints, per command, the median wall time and its ratio to a bare interpreter, and the median CPU
time (user + system) of the process, which a loaded machine disturbs less than wall time.
The cases run round by round, interleaved, so the machine's noise hits them alike.
``--compare-source`` runs the same commands from another source tree of this project (e.g.
``git archive BASE | tar -x -C /tmp/base``) with this installation's metadata, side by side;
``--compare`` times another installation's ``mosaic``.
Bytecode is written (an installed package has it; a first round warms it up) even where
$PYTHONDONTWRITEBYTECODE is set: without it every start compiles our modules again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

BIN = Path(sys.executable).parent
FROM_SOURCE = "import sys; from mosaic_core.cli.main import main; sys.exit(main())"
GOALS = {"mosaic --help": 3.0, "mosaic workers": 4.0}  # at most this many times a bare interpreter's wall time


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``cmd``, in a folder with no package of ours
    (``python -c`` puts the current folder first on ``sys.path``)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir()
    )
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def source_site(tree: Path, folder: Path) -> Path:
    """A folder for PYTHONPATH whose packages are ``tree``'s (links named by import name: its
    pyproject.toml's ``[tool.setuptools.package-dir]``, and ``mosaic_core``)."""
    mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"].get("package-dir", {})
    for name, where in {"mosaic_core": "mosaic_core", **mapping}.items():
        if name and (tree / where).is_dir():
            (folder / name).symlink_to((tree / where).resolve())
    return folder


def commands(prefix: list[str]) -> dict[str, list[str]]:
    return {
        "mosaic --help": [*prefix, "--help"],
        "mosaic workers": [*prefix, "workers"],
        "mosaic workers --json": [*prefix, "workers", "--json"],
        "mosaic run --dry-run (ppo)": [
            *prefix,
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "1000",
            "--dry-run",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--compare", type=Path, help="another installation's bin folder")
    parser.add_argument("--compare-source", type=Path, help="another source tree of this project (a baseline)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cases: dict[str, tuple[list[str], dict[str, str]]] = {"python -c pass": ([sys.executable, "-c", "pass"], env)}
    with tempfile.TemporaryDirectory() as scratch:
        for name, cmd in commands([str(BIN / "mosaic")]).items():
            cases[name] = (cmd, env)
        if args.compare_source:
            site = source_site(args.compare_source, Path(scratch))
            base_env = {**env, "PYTHONPATH": str(site)}
            for name, cmd in commands([sys.executable, "-c", FROM_SOURCE]).items():
                cases[f"compare-source: {name}"] = (cmd, base_env)
        if args.compare:
            for name, cmd in commands([str(args.compare / "mosaic")]).items():
                cases[f"compare: {name}"] = (cmd, env)
        for cmd, case_env in cases.values():  # warm-up: bytecode written, files in the page cache
            timed(cmd, case_env)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, (cmd, case_env) in cases.items():
                results[name].append(timed(cmd, case_env))
    base = statistics.median(wall for wall, _cpu in results["python -c pass"])
    print(
        f"{len(os.sched_getaffinity(0))} usable CPUs, load {os.getloadavg()[0]:.1f} (1-min average at the end), "
        f"median of {args.repeat}"
    )
    print(f"{'command':58} {'wall s':>7} {'x python':>9} {'cpu s':>7}  goal")
    for name, runs in results.items():
        wall = statistics.median(w for w, _c in runs)
        cpu = statistics.median(c for _w, c in runs)
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"  <= {goal}x {'ok' if wall / base <= goal else 'OVER'}"
        print(f"{name:58} {wall:7.3f} {wall / base:9.2f} {cpu:7.3f}{verdict}")


if __name__ == "__main__":
    main()
