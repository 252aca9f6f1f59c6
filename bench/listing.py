"""Listing 20 vs 2,000 vs 10,000 runs: ``mosaic runs --json`` end to end (a fresh process), the
first call (which builds the runs root's index) and the next ones (which read it); and in this
process the index's listing next to reading every run directory (what listing did before it).

Each run directory is what a finished run leaves: config.json, events.jsonl (start, metrics,
heartbeats, end), manifest.json, a log. Run by hand:
  .venv/bin/python bench/listing.py [--sizes 20 2000 10000] [--repeat 3]
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


def make_runs(root: Path, count: int) -> None:
    root.mkdir(mode=0o700)
    now = time.time()
    for i in range(count):
        run = root / f"run{i:06d}"
        (run / "logs").mkdir(parents=True, mode=0o700)
        start = now - 60 * (count - i)
        (run / "config.json").write_text(
            json.dumps(
                {
                    "run_id": run.name,
                    "worker": "cleanrl",
                    "algo": "ppo",
                    "env_id": "CartPole-v1",
                    "total_timesteps": 50_000,
                }
            )
        )
        events = [("run_started", {"worker": "cleanrl", "algo": "ppo", "env_id": "CartPole-v1"})]
        events += [
            ("metrics", {"global_step": step, "episodic_return": step / 1000}) for step in range(0, 50_000, 5000)
        ]
        events.append(("run_failed" if i % 7 == 0 else "run_completed", {"returncode": 0}))
        (run / "events.jsonl").write_text(
            "".join(
                json.dumps({"event": e, "run_id": run.name, "seq": n, "timestamp": start + n, "payload": p}) + "\n"
                for n, (e, p) in enumerate(events, 1)
            )
        )
        (run / "manifest.json").write_text(json.dumps({"schema": "mosaic.manifest/1", "status": "completed"}))
        (run / "logs" / "cleanrl.stderr.log").write_text("done\n")


def cli_list(root: Path) -> float:
    started = time.perf_counter()
    out = subprocess.run(
        [str(BIN / "mosaic"), "runs", "--json", "--runs-dir", str(root)], capture_output=True, text=True, check=True
    ).stdout
    elapsed = time.perf_counter() - started
    assert out.startswith("["), out[:200]
    return elapsed


def indexed_in_process(root: Path) -> float:
    from mosaic_core.runstore.index import list_runs

    started = time.perf_counter()
    list_runs(root)
    return time.perf_counter() - started


def scan_every_dir(root: Path) -> float:
    from mosaic_core.runstore.summary import summarize

    started = time.perf_counter()
    [summarize(Path(e.path)) for e in os.scandir(root) if e.is_dir()]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 2000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes:
            root = Path(scratch) / f"runs{size}"
            make_runs(root, size)
            first = cli_list(root)  # builds the index
            warm = statistics.median(cli_list(root) for _ in range(args.repeat))
            inner = statistics.median(indexed_in_process(root) for _ in range(args.repeat))
            scan = statistics.median(scan_every_dir(root) for _ in range(args.repeat))
            rows.append((size, first, warm, inner, scan))
    base = rows[0][2]
    print(f"mosaic runs --json, {len(os.sched_getaffinity(0))} CPUs, load {os.getloadavg()[0]:.1f}")
    print(
        f"  {'runs':>6}  {'CLI, first (builds index)':>25}  {'CLI, indexed':>12}  {'x of ' + str(rows[0][0]):>8}  "
        f"{'in process: index':>17}  {'reading every dir':>17}"
    )
    for size, first, warm, inner, scan in rows:
        print(
            f"  {size:>6}  {first:>23.2f} s  {warm:>10.2f} s  {warm / base:>7.2f}x  {inner:>15.3f} s  {scan:>15.3f} s"
        )


if __name__ == "__main__":
    main()
