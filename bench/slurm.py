"""Benchmark: what going through Slurm adds to one run, and a fixed sweep's trials per minute
here vs as one Slurm job array (prints figures; nothing is asserted).

    .venv/bin/python bench/slurm.py [--trials 4] [--timesteps 1024] [--runs 3]

Starts a real one-node Slurm cluster (tests/slurm/cluster.py: munged with its own key and
socket, slurmctld, slurmd; 2 CPUs; needs root and slurm-wlm; stopped by pid at the end), then:
1. per-run overhead: the example worker with a tiny budget, ``mosaic run`` here vs with
   ``--launcher slurm`` (median wall seconds of ``--runs`` runs each, and where the time goes);
2. trials per minute: the same ppo sweep (1 seed, ``--timesteps`` steps) with ``--parallel 2``
   here, and with ``--launcher slurm --slurm-array-limit 2`` (one job array, 1 CPU a task).
On one machine both sides share the same cores: Slurm shows its overhead, not a speed-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cluster import SPEC, medians, timed  # noqa: E402
from tests.slurm.cluster import SlurmCluster, why_not_here  # noqa: E402

BIN = Path(sys.executable).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--timesteps", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    reason = why_not_here()
    if reason:
        raise SystemExit(f"bench/slurm.py: {reason}")
    work = Path(tempfile.mkdtemp(prefix="mosaic-bench-slurm-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOSAIC_", "SLURM_"))}
    started = time.monotonic()
    cluster = SlurmCluster(work / "cluster")
    try:
        cluster.start()
        print(f"one-node Slurm cluster up in {time.monotonic() - started:.1f} s", flush=True)
        slurm_env = {**env, **cluster.env()}
        run = [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            "example",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "2000",
            "--json",
        ]
        here, slurm, here_phases, slurm_phases = [], [], [], []
        for _ in range(args.runs):  # alternated: the machine's noise hits both alike
            here.append(timed([*run, "--runs-dir", str(work / "runs-here")], env, work, here_phases))
            slurm.append(
                timed(
                    [*run, "--runs-dir", str(work / "runs-slurm"), "--launcher", "slurm"], slurm_env, work, slurm_phases
                )
            )
        h, s = statistics.median(here), statistics.median(slurm)
        print(
            f"one run (example worker, 2000 steps), median of {args.runs}, load {os.getloadavg()[0]:.1f}: here "
            f"{h:.2f} s, through Slurm {s:.2f} s, overhead {s - h:+.2f} s per run ({s / h:.2f}x)",
            flush=True,
        )
        print(
            f"  here: {medians(here_phases)}; through Slurm: {medians(slurm_phases)} (start: to run_started; "
            "end: the terminal event to the exit)",
            flush=True,
        )
        spec = work / "spec.toml"
        spec.write_text(SPEC.format(timesteps=args.timesteps, trials=args.trials), encoding="utf-8")
        rates = {}
        for name, extra, run_env in (
            ("here", ["--parallel", "2"], env),
            ("slurm", ["--launcher", "slurm", "--slurm-array-limit", "2"], slurm_env),
        ):
            sweep = [
                str(BIN / "mosaic"),
                "sweep",
                "run",
                str(spec),
                "--storage",
                f"sqlite:///{work / f'{name}.db'}",
                "--runs-dir",
                str(work / f"sweep-{name}"),
                *extra,
            ]
            seconds = timed(sweep, run_env, work)
            rates[name] = args.trials / seconds * 60
            print(
                f"sweep {name}: {args.trials} trials ({args.timesteps} ppo steps each) in {seconds:.1f} s = "
                f"{rates[name]:.2f} trials/min",
                flush=True,
            )
        print(
            f"trials per minute: here {rates['here']:.2f}, one-node Slurm job array {rates['slurm']:.2f} "
            f"(ratio {rates['slurm'] / rates['here']:.2f})"
        )
    finally:
        left = cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
        if left:
            print(f"warning: Slurm daemons left: {left}", file=sys.stderr)


if __name__ == "__main__":
    main()
