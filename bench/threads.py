"""A lone run's thread budget: the same CleanRL run with 1 thread vs 2 (or more), on a quiet
machine and under load, side by side.

Upstream CleanRL scripts leave torch's thread count alone, so the run's thread budget
(``OMP_NUM_THREADS``, which torch's intra-op pool takes) decides how many threads its network
updates use. The bench runs upstream's ``td3_continuous_action`` (from a CleanRL checkout) on
Pendulum through ``mosaic run --num-cpus N`` for each budget, alternately (a busy moment hits
every budget alike), first as the machine is, then with one busy loop per usable CPU beside it
(started here, stopped by pid). A run's rate is upstream's own ``charts/SPS`` at its end (env
steps per second since its start, updates included). Each row says the 1-minute load average
before and after it. Best of ``--repeats``.

Run by hand (a CleanRL checkout: ``git clone https://github.com/vwxyzjn/cleanrl``):
    .venv/bin/python bench/threads.py --cleanrl-home ~/cleanrl [--steps 3000] [--repeats 2]
        [--budgets 1 2] [--algo td3_continuous_action --env-id Pendulum-v1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from load import busy_loops  # bench/load.py (this script's folder is on sys.path)

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def one_run(ns: argparse.Namespace, budget: int, runs: Path, run_id: str, env: dict[str, str]) -> tuple[float, float]:
    """(env steps/s by upstream's charts/SPS, wall seconds) of one run with ``budget`` threads."""
    extras = {"cleanrl_home": str(ns.cleanrl_home), "learning_starts": ns.learning_starts}
    start = time.perf_counter()
    done = subprocess.run(
        [
            *MOSAIC,
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            ns.algo,
            "--env-id",
            ns.env_id,
            "--total-timesteps",
            str(ns.steps),
            "--seed",
            "1",
            "--num-cpus",
            str(budget),
            "--no-save",
            "--extras",
            json.dumps(extras),
            "--runs-dir",
            str(runs),
            "--run-id",
            run_id,
            "--quiet",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    launch = json.loads((runs / run_id / "launch.json").read_text()) if (runs / run_id / "launch.json").exists() else {}
    if done.returncode != 0:
        sys.exit(f"bench/threads.py: the run with {budget} thread(s) failed: {done.stderr[-800:]}")
    recorded = (launch.get("threads") or {}).get("threads")
    if recorded != budget:
        sys.exit(f"bench/threads.py: the run recorded a budget of {recorded}, not {budget}")
    from mosaic_analytics.curves import read_scalars

    rates = read_scalars(runs / run_id, "charts/SPS")
    if not rates.values:
        sys.exit(f"bench/threads.py: {run_id} wrote no charts/SPS")
    return rates.values[-1], wall


def measure(ns: argparse.Namespace, runs: Path, label: str, env: dict[str, str]) -> None:
    best: dict[int, tuple[float, float]] = {}
    before = os.getloadavg()[0]
    for repeat in range(ns.repeats):
        for budget in ns.budgets:
            rate, wall = one_run(ns, budget, runs, f"{label}-{budget}-{repeat}", env)
            old = best.get(budget)
            best[budget] = (max(rate, old[0]) if old else rate, min(wall, old[1]) if old else wall)
    after = os.getloadavg()[0]
    cells = "  ".join(
        f"{budget} thread{'s' if budget > 1 else ''}: {rate:6.0f} SPS {wall:5.1f} s"
        for budget, (rate, wall) in best.items()
    )
    first = best[ns.budgets[0]][0]
    ratios = "  ".join(f"{b}/{ns.budgets[0]}: {best[b][0] / first:.2f}x" for b in ns.budgets[1:])
    print(f"{label:>6} (load {before:4.1f} -> {after:4.1f})  {cells}  {ratios}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cleanrl-home", type=Path, required=True, help="a CleanRL checkout (upstream's scripts)")
    parser.add_argument("--algo", default="td3_continuous_action")
    parser.add_argument("--env-id", default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--learning-starts", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budgets", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--loops",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="busy loops beside the loaded rows (default: one per usable CPU)",
    )
    parser.add_argument("--skip-idle", action="store_true")
    ns = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key not in THREAD_VARS}
    print(
        f"{ns.algo} on {ns.env_id}, {ns.steps} steps (learning from {ns.learning_starts}), "
        f"{len(os.sched_getaffinity(0))} usable CPUs; best of {ns.repeats}"
    )
    with tempfile.TemporaryDirectory(prefix="threads-") as folder:
        if not ns.skip_idle:
            measure(ns, Path(folder), "idle", env)
        with busy_loops(ns.loops):
            measure(ns, Path(folder), "load", env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
