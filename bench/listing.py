"""Listing 20 vs 2,000 vs 10,000 runs: ``mosaic runs`` and ``mosaic runs --json`` end to end (a
fresh process each), cold (the first listing: it builds the runs root's index) and warm (nothing
changed since), the warm ones beside the goal (at most 1.5x the same over the smallest root), and
a warm ``--recheck`` (every run's files stat'ed, as listing did before rows were sealed); then a
listing after one run changed (it re-reads that run only) and, in this process, the index's
warm listing next to summarizing every run directory (what listing did without the index).

Each run directory is what a finished run leaves: config.json, events.jsonl (start, metrics, end),
manifest.json, a log; one in 500 (at least 3 per root) is bad: a corrupt config, a half-written
event log (a line cut off), or a 1 GiB one-line event log (sparse). The warm figures are taken in
rounds, every root once per round, so a change of load hits them all alike. ``--compare-source
OLD_TREE`` (e.g. ``git archive BASE | tar -x -C /tmp/base``) lists copies of the roots through that
tree's code in the same rounds (its own index files), a row "before" under each size. Run by hand:
  .venv/bin/python bench/listing.py [--sizes 20 2000 10000] [--repeat 5] [--compare-source OLD_TREE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from startup import FROM_SOURCE, source_site  # bench/startup.py (this script's folder is on sys.path)

BIN = Path(sys.executable).parent
GOAL = 1.5
BAD_KINDS = ("corrupt", "half-written", "huge")


def make_runs(root: Path, count: int) -> int:
    """``count`` runs under ``root``; how many of them are bad."""
    root.mkdir(mode=0o700)
    now = time.time()
    bad = max(3, count // 500)
    for i in range(count):
        run = root / f"run{i:06d}"
        (run / "logs").mkdir(parents=True, mode=0o700)
        start = now - 60 * (count - i)
        config = {"run_id": run.name, "worker": "cleanrl", "algo": "ppo", "env_id": "CartPole-v1"}
        (run / "config.json").write_text(json.dumps({**config, "total_timesteps": 50_000}))
        events = [("run_started", {"worker": "cleanrl", "algo": "ppo", "env_id": "CartPole-v1"})]
        events += [("metrics", {"global_step": s, "episodic_return": s / 1000}) for s in range(0, 50_000, 5000)]
        events.append(("run_failed" if i % 7 == 0 else "run_completed", {"returncode": 0}))
        lines = "".join(
            json.dumps({"event": e, "run_id": run.name, "seq": n, "timestamp": start + n, "payload": p}) + "\n"
            for n, (e, p) in enumerate(events, 1)
        )
        (run / "events.jsonl").write_text(lines)
        (run / "manifest.json").write_text(json.dumps({"schema": "mosaic.manifest/1", "status": "completed"}))
        (run / "logs" / "cleanrl.stderr.log").write_text("done\n")
        if i % (count // bad) == 1 and i // (count // bad) < bad:
            spoil(run, BAD_KINDS[(i // (count // bad)) % len(BAD_KINDS)], lines)
    return bad


def spoil(run: Path, kind: str, lines: str) -> None:
    if kind == "corrupt":
        (run / "config.json").write_text('{"worker": "cleanrl", "algo": ')
    elif kind == "half-written":
        (run / "events.jsonl").write_text(lines[: len(lines) // 2])
        (run / "manifest.json").unlink()
    else:
        with open(run / "events.jsonl", "wb") as handle:
            handle.truncate(1 << 30)


def cli_list(root: Path, *flags: str, site: Path | None = None) -> float:
    """Seconds of ``mosaic runs FLAGS`` over ``root`` (``site``: through another tree's code)."""
    env = {**os.environ, "PYTHONPATH": str(site)} if site else None
    cmd = [sys.executable, "-c", FROM_SOURCE] if site else [str(BIN / "mosaic")]
    started = time.perf_counter()
    subprocess.run(
        [*cmd, "runs", *flags, "--runs-dir", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    return time.perf_counter() - started


def touch_one(root: Path, count: int, record: bool) -> None:
    """One run changes: its log grows and the host records it (a resume starting; ``record``
    False: a baseline tree's root, whose index this tree's code must not rewrite)."""
    from mosaic_core.runstore.index import record_run

    path = root / f"run{count // 2:06d}" / "events.jsonl"
    with open(path, "a") as handle:
        handle.write(json.dumps({"event": "run_resumed", "run_id": path.parent.name, "timestamp": time.time()}) + "\n")
    if record:
        record_run(path.parent)


def in_process(root: Path, summarize_all: bool) -> float:
    from mosaic_core.runstore.index import list_runs
    from mosaic_core.runstore.summary import summarize

    started = time.perf_counter()
    if summarize_all:
        [summarize(Path(e.path)) for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")]
    else:
        list_runs(root)
    return time.perf_counter() - started


def measure(roots: dict[str, Path], repeat: int, site: Path | None) -> dict[str, dict[str, float]]:
    """Per root (``"20"``, or ``"20 before"``: listed through ``site``'s code): its figures."""

    def through(name: str) -> Path | None:
        return site if name.endswith("before") else None

    cold = {name: cli_list(root, "--json", site=through(name)) for name, root in roots.items()}
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in roots}
    for _ in range(repeat):
        for name, root in roots.items():
            for kind, seconds in (
                ("table", cli_list(root, site=through(name))),
                ("json", cli_list(root, "--json", site=through(name))),
                ("recheck", math.nan if through(name) else cli_list(root, "--json", "--recheck")),
                ("index", math.nan if through(name) else in_process(root, False)),
            ):
                samples[name].setdefault(kind, []).append(seconds)
    figures = {name: {k: statistics.median(v) for k, v in kinds.items()} for name, kinds in samples.items()}
    for name, root in roots.items():
        figures[name]["cold"] = cold[name]
        touch_one(root, int(name.split()[0]), record=not through(name))
        figures[name]["one changed"] = cli_list(root, "--json", site=through(name))
        figures[name]["every dir"] = math.nan if through(name) else in_process(root, True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 2000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--compare-source", type=Path, help="another source tree of this project (a baseline)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        site = source_site(args.compare_source, Path(scratch)) if args.compare_source else None
        roots, bad = {}, {}
        for size in args.sizes:
            for name in [str(size), *([f"{size} before"] if site else [])]:
                roots[name] = Path(scratch) / f"runs-{name.replace(' ', '-')}"
                bad[name] = make_runs(roots[name], size)
        figures = measure(roots, args.repeat, site)
    base = {name: figures[name] for name in figures if name.split()[0] == str(args.sizes[0])}
    print(f"mosaic runs, {len(os.sched_getaffinity(0))} CPUs, load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"warm: median of {args.repeat}, the roots measured in turn; goal: warm <= {GOAL}x the {args.sizes[0]} runs'")
    print(
        f"  {'runs':>13} {'bad':>4}  {'cold --json':>11}  {'warm table':>10} {'x':>6}  {'warm --json':>11} {'x':>6}  "
        f"{'one changed':>11}  {'--recheck':>9}  {'in process: index':>17}  {'every dir':>9}"
    )
    for size, f in figures.items():
        first = base[size.replace(size.split()[0], str(args.sizes[0]), 1)]
        table, js = f["table"] / first["table"], f["json"] / first["json"]
        verdict = "ok" if max(table, js) <= GOAL else "OVER"
        print(
            f"  {size:>13} {bad[size]:>4}  {f['cold']:>9.2f} s  {f['table']:>8.3f} s {table:>5.2f}x  "
            f"{f['json']:>9.3f} s {js:>5.2f}x  {f['one changed']:>9.3f} s  {f['recheck']:>7.3f} s  {f['index']:>15.3f} s  "
            f"{f['every dir']:>7.2f} s  {verdict}"
        )


if __name__ == "__main__":
    main()
