"""N runs at once on this machine vs one alone, with and without the host's thread budget.

Each round starts N ``mosaic run`` processes of the same job at once and times the slowest; "with
budget" gives each ``--num-cpus usable/N`` (what the daemon's ``--max-concurrent N`` and the sweep's
``--workers N`` give), "without" leaves torch's default threading (every run sizes its pools to every
core). Use a script that does not pin its own threads, e.g. upstream CleanRL's SAC from a checkout
(the bundled algorithms call ``torch.set_num_threads(1)`` themselves).

Run by hand:
  .venv/bin/python bench/concurrency.py --cleanrl-home ~/cleanrl --algo sac_continuous_action \\
      --env-id Pendulum-v1 --total-timesteps 1500 --runs 2 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def one_round(args: argparse.Namespace, runs: int, budget: bool, root: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MOSAIC_CPU_SHARE")}
    extras = {"cleanrl_home": args.cleanrl_home} if args.cleanrl_home else {}
    cpus = max(1, len(os.sched_getaffinity(0)) // runs)
    started = time.perf_counter()
    procs = []
    for _ in range(runs):
        command = [str(BIN / "mosaic"), "run", "--worker", "cleanrl", "--algo", args.algo, "--env-id", args.env_id,
                   "--total-timesteps", str(args.total_timesteps), "--runs-dir", str(root), "--quiet",
                   "--extras", json.dumps(extras)]
        if budget:
            command += ["--num-cpus", str(cpus)]
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a run failed: {err.strip().splitlines()[-1:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="sac_continuous_action")
    parser.add_argument("--env-id", default="Pendulum-v1")
    parser.add_argument("--total-timesteps", type=int, default=1500)
    parser.add_argument("--cleanrl-home", help="an upstream CleanRL checkout (its scripts do not pin threads)")
    parser.add_argument("--runs", type=int, default=2, help="runs at once")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"1 run alone": [], f"{args.runs} runs, no budget": [],
                                     f"{args.runs} runs, budget": []}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.repeat):  # interleaved: the machine's noise hits every case alike
            times["1 run alone"].append(one_round(args, 1, False, Path(scratch)))
            times[f"{args.runs} runs, no budget"].append(one_round(args, args.runs, False, Path(scratch)))
            times[f"{args.runs} runs, budget"].append(one_round(args, args.runs, True, Path(scratch)))
    alone = statistics.median(times["1 run alone"])
    print(f"{args.algo} on {args.env_id}, {args.total_timesteps} steps, {len(os.sched_getaffinity(0))} usable CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    for label, values in times.items():
        print(f"  {label:<22} median {statistics.median(values):6.1f} s   x{statistics.median(values) / alone:.2f} of one run")


if __name__ == "__main__":
    main()
