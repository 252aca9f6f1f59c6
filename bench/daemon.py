"""The trainer daemon under load: RegisterWorker throughput and latency, and how many tiny runs
it supervises at once with its own CPU and memory meanwhile.

Run by hand: .venv/bin/python bench/daemon.py [--seconds 5] [--clients 1,8,32] [--runs 16]

The daemon runs in its own process on loopback (state in a temporary dir, removed after).
1. Registration: one run per client (its process is ``sleep``, so it never registers by
   itself); each client registers, then keeps re-registering with its current token (the
   replace path: token check, new token, one SQLite write) for ``--seconds``.
2. Supervision: ``--runs`` runs of a tiny worker submitted at once (max_concurrent = runs);
   each registers over gRPC, heartbeats every 0.5 s (JSONL + gRPC) for ``--run-seconds``
   and completes. Prints wall time, how many executed at once, and the daemon's CPU and RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TINY_WORKER = r"""
import json, sys, time
from mosaic_core.trainer.client import RunSession
config_path, runs_dir, target, seconds = sys.argv[1:5]
run_id = json.load(open(config_path))["run_id"]
def emit(event, **payload):
    print(json.dumps({"event": event, "run_id": run_id, "timestamp": time.time(), "payload": payload}), flush=True)
session = RunSession.register(target, run_id=run_id, schema_id="bench.tiny")
emit("run_started")
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    emit("heartbeat", grpc_heartbeat=session.heartbeat())
    time.sleep(0.5)
session.close()
emit("run_completed", returncode=0)
"""


def serve(state_dir: str, worker: str, max_concurrent: int, run_seconds: float) -> None:
    from mosaic_core.trainer.daemon import DaemonOptions
    from mosaic_core.trainer.daemon import serve as serve_daemon

    def command(spec):
        if worker == "sleep":
            return ["sleep", "600"]
        return [
            sys.executable,
            "-c",
            TINY_WORKER,
            str(spec.config_path),
            str(spec.runs_dir),
            spec.target,
            str(run_seconds),
        ]

    options = DaemonOptions(
        state_dir=Path(state_dir),
        listen="127.0.0.1:0",
        gpus=0,
        max_concurrent=max_concurrent,
        heartbeat_timeout=120.0,
        grace_period=1.0,
        worker_command=command,
    )
    serve_daemon(options, on_ready=lambda d: print(json.dumps({"target": d.address, "pid": d.pid}), flush=True))


class Daemon:
    def __init__(self, worker: str, max_concurrent: int, run_seconds: float = 0.0):
        self.state = tempfile.mkdtemp(prefix="mosaic-bench-")
        argv = [
            sys.executable,
            __file__,
            "--serve",
            self.state,
            "--worker",
            worker,
            "--max-concurrent",
            str(max_concurrent),
            "--run-seconds",
            str(run_seconds),
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        self.target, self.pid = ready["target"], ready["pid"]

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        shutil.rmtree(self.state, ignore_errors=True)


def config(n: int) -> str:
    return json.dumps({"run_id": f"bench-{n}", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1})


def bench_register(clients: int, seconds: float) -> dict:
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb

    daemon = Daemon("sleep", max_concurrent=clients)
    try:
        for n in range(clients):
            client.submit(daemon.target, config(n))
        while sum(r.status == pb.RUN_STATUS_HSHK for r in client.list_runs(daemon.target)) < clients:
            time.sleep(0.05)
        latencies: list[list[float]] = [[] for _ in range(clients)]
        barrier = threading.Barrier(clients + 1)
        stop_at = [0.0]

        def worker(n: int) -> None:
            session = client.RunSession.register(daemon.target, run_id=f"bench-{n}", schema_id="bench")
            barrier.wait()
            while time.perf_counter() < stop_at[0]:
                started = time.perf_counter()
                replacement = client.RunSession.register(
                    daemon.target, run_id=f"bench-{n}", schema_id="bench", session_token=session.session_token
                )
                latencies[n].append(time.perf_counter() - started)
                session.close()
                session = replacement
            session.close()

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        cpu0 = daemon.cpu_seconds()
        stop_at[0] = time.perf_counter() + seconds
        barrier.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - began
        cpu = daemon.cpu_seconds() - cpu0
        every = sorted(x for per in latencies for x in per)
        return {
            "clients": clients,
            "calls": len(every),
            "per_s": len(every) / elapsed,
            "p50_ms": 1000 * statistics.median(every),
            "p99_ms": 1000 * every[int(0.99 * (len(every) - 1))],
            "daemon_cpu_pct": 100 * cpu / elapsed,
            "daemon_rss_mb": daemon.rss_mb(),
        }
    finally:
        daemon.close()


def bench_supervise(runs: int, run_seconds: float) -> dict:
    from mosaic_core.trainer import client
    from mosaic_core.trainer import trainer_pb2 as pb

    daemon = Daemon("tiny", max_concurrent=runs, run_seconds=run_seconds)
    try:
        rss_before = daemon.rss_mb()
        cpu0, began = daemon.cpu_seconds(), time.perf_counter()
        for n in range(runs):
            client.submit(daemon.target, config(n))
        peak_exec, peak_rss = 0, rss_before
        while True:
            records = client.list_runs(daemon.target)
            peak_exec = max(peak_exec, sum(r.status == pb.RUN_STATUS_EXEC for r in records))
            peak_rss = max(peak_rss, daemon.rss_mb())
            if all(r.status in (pb.RUN_STATUS_TERM, pb.RUN_STATUS_FAULT) for r in records):
                break
            time.sleep(0.2)
        elapsed = time.perf_counter() - began
        cpu = daemon.cpu_seconds() - cpu0
        completed = sum(r.terminal_event == "run_completed" for r in records)
        return {
            "runs": runs,
            "completed": completed,
            "peak_executing": peak_exec,
            "wall_s": elapsed,
            "daemon_cpu_s": cpu,
            "daemon_cpu_pct": 100 * cpu / elapsed,
            "rss_idle_mb": rss_before,
            "rss_peak_mb": peak_rss,
        }
    finally:
        daemon.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="registration phase length per client count")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--run-seconds", type=float, default=10.0)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--worker", default="sleep", help=argparse.SUPPRESS)
    parser.add_argument("--max-concurrent", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.worker, args.max_concurrent, args.run_seconds)
        return
    print(f"machine: {os.cpu_count()} CPUs; daemon and clients on loopback, clients are threads of one process")
    print("RegisterWorker (replace with current token)")
    print(f"{'clients':>8} {'calls':>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'daemon CPU %':>13} {'RSS MB':>7}")
    for clients in (int(c) for c in args.clients.split(",")):
        r = bench_register(clients, args.seconds)
        print(
            f"{r['clients']:>8} {r['calls']:>7} {r['per_s']:>8.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
            f"{r['daemon_cpu_pct']:>13.0f} {r['daemon_rss_mb']:>7.0f}"
        )
    r = bench_supervise(args.runs, args.run_seconds)
    print(
        f"\nSupervision: {r['runs']} tiny runs of {args.run_seconds:g} s submitted at once "
        f"(register + heartbeat every 0.5 s over gRPC and JSONL)"
    )
    print(
        f"  completed {r['completed']}/{r['runs']}, peak executing at once {r['peak_executing']}, "
        f"wall {r['wall_s']:.1f} s"
    )
    print(
        f"  daemon CPU {r['daemon_cpu_s']:.2f} s ({r['daemon_cpu_pct']:.1f} % of one core), "
        f"RSS {r['rss_idle_mb']:.0f} MB idle → {r['rss_peak_mb']:.0f} MB peak"
    )


if __name__ == "__main__":
    main()
