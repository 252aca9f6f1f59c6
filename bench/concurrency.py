"""N runs at once through a trainer daemon vs one alone, and where the CPU goes.

A ``mosaic daemon --max-concurrent N`` of its own (loopback, state in a temporary folder) runs
the same job, round by round: one run alone, then N runs submitted at once (interleaved, so the
machine's noise hits both alike). Each run's wall time is from its submission to its terminal
event in ``events.jsonl`` (read from the run folder: the bench asks the daemon nothing while
runs execute). Meanwhile the bench reads ``/proc`` every 0.1 s and splits the CPU time (user +
system) by process: the daemon, each run's ``mosaic run`` host, its training process (with
anything it started). A host's last reading after its training process ended holds that
process's exact total (its reaped children's time); a process's last 0.1 s may be missed.

The ratio is the goal's figure (``x1.00``: N runs take no longer than one); the CPU split says
what besides training costs a core, which a loaded machine disturbs less than wall time. Two more
lines: the script run by hand with the same arguments (training's own CPU, so the training line
minus it is MOSAIC's cost inside the training process) and the cores alone (N copies of a fixed
loop at once vs one: the ratio no run can beat on this machine now).

Run by hand:
  .venv/bin/python bench/concurrency.py [--runs 2] [--repeat 3] [--total-timesteps 1500]
      [--algo sac_continuous_action --env-id Pendulum-v1] [--cleanrl-home ~/cleanrl]
The bundled algorithms pin one torch thread themselves; ``--cleanrl-home`` runs upstream's
script from a checkout, which does not (the daemon's thread budget then matters).
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

BIN = Path(sys.executable).parent
TICK = os.sysconf("SC_CLK_TCK")
TERMINAL = ("run_completed", "run_failed", "run_cancelled")
GOAL = 1.1  # N runs at once, at most this many times one alone


def proc_stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, reaped children's CPU seconds) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


class CpuSplit:
    """Samples the daemon's process tree: CPU seconds by role (daemon, host, training)."""

    def __init__(self, daemon_pid: int):
        self.daemon_pid = daemon_pid
        self.hosts: dict[int, tuple[float, float]] = {}  # host pid -> (own, reaped children) at its last reading
        self.training: dict[int, tuple[int, float]] = {}  # training pid -> (its host, own + reaped) at its last reading
        self.daemon = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuSplit:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.read()

    def read(self) -> None:
        parents: dict[int, int] = {}
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (found := proc_stat(int(name))) is not None:
                parents[int(name)] = found[0]
                stats[int(name)] = found
        daemon = stats.get(self.daemon_pid)
        if daemon:
            self.daemon = daemon[1]
        for pid, (ppid, own, reaped) in stats.items():
            if ppid == self.daemon_pid:
                self.hosts[pid] = (own, reaped)
            elif parents.get(ppid) == self.daemon_pid:
                self.training[pid] = (ppid, own + reaped)

    def totals(self) -> dict[str, float]:
        host_own = sum(own for own, _reaped in self.hosts.values())
        # a host's reaped children's time is its training process's whole time, once it ended
        training = sum(
            max(reaped, sum(cpu for host, cpu in self.training.values() if host == pid))
            for pid, (_own, reaped) in self.hosts.items()
        )
        return {"daemon": self.daemon, "host": host_own, "training": training}


class Daemon:
    def __init__(self, state: Path, max_concurrent: int, env: dict[str, str], allow: list[str]):
        self.state = state
        self.stderr = open(state.parent / "daemon.log", "w")
        self.proc = subprocess.Popen(
            [
                str(BIN / "mosaic"),
                "daemon",
                "--listen",
                "127.0.0.1:0",
                "--state-dir",
                str(state),
                "--max-concurrent",
                str(max_concurrent),
                *[arg for folder in allow for arg in ("--allow-scripts", folder)],
            ],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
        )
        ready = json.loads(self.proc.stdout.readline())
        self.target, self.pid = ready["listen_address"], ready["pid"]
        self.token = Path(ready["token_file"]).read_text().strip() if ready.get("token_file") else None

    def submit(self, config: dict) -> str:
        from mosaic_core.trainer import client

        return client.submit(self.target, json.dumps(config), token=self.token).run_id

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.stderr.close()


def wait_ended(events: Path, timeout: float = 1800) -> tuple[float, str]:
    """(time of the terminal event, its name) once ``events`` has one."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            last = events.read_text().strip().splitlines()[-1]
            event = json.loads(last)
            if event["event"] in TERMINAL:
                return float(event["timestamp"]), event["event"]
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"no terminal event in {events} after {timeout} s")


def one_round(daemon: Daemon, config: dict, runs: int) -> tuple[float, dict[str, float]]:
    """(slowest run's seconds from submission to its end, CPU seconds by role) of ``runs`` at once."""
    with CpuSplit(daemon.pid) as split:
        daemon_before = split.daemon or (proc_stat(daemon.pid) or (0, 0.0, 0.0))[1]
        started = time.time()
        ids = [daemon.submit(config) for _ in range(runs)]
        ends = []
        for run_id in ids:
            when, event = wait_ended(daemon.state / "runs" / run_id / "events.jsonl")
            if event != "run_completed":
                log = (daemon.state / "runs" / run_id / "events.jsonl").read_text()[-1500:]
                raise SystemExit(f"run {run_id} ended {event}:\n{log}")
            ends.append(when)
        while any(proc_stat(pid) for pid in split.hosts):  # every host gone: its last reading taken
            time.sleep(0.05)
        split.read()
    cpu = split.totals()
    cpu["daemon"] -= daemon_before
    return max(ends) - started, cpu


def direct_run(started: dict, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU seconds) of the run's script run by hand with the run's own arguments (what
    its ``run_started`` names) and one thread, as the budget gives it: training without MOSAIC."""
    home = Path(started["script"]).parent.parent  # an upstream checkout: its scripts import cleanrl_utils
    path = {"PYTHONPATH": str(home)} if (home / "cleanrl_utils").is_dir() else {}
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, started["script"], *started["argv"]],
            cwd=folder,
            env={**env, **path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        if status != 0:
            raise SystemExit(f"the script by hand failed ({status}): {started['script']} {started['argv']}")
        return time.perf_counter() - began, usage.ru_utime + usage.ru_stime


BUSY = "n = 0\nfor i in range(10_000_000):\n    n += i\n"


def machine_floor(runs: int) -> float:
    """Wall time of ``runs`` copies of a fixed pure-Python loop at once over one alone: what the
    cores themselves give (1.00 on ``runs`` free cores; more where vCPUs share a physical core,
    or other work takes them), the floor of the runs' ratio."""

    def together(copies: int) -> float:
        began = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(copies)]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - began

    return together(runs) / together(1)


def first_started(state: Path) -> dict:
    events = next((state / "runs").glob("*/events.jsonl"))
    return json.loads(events.read_text().splitlines()[0])["payload"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="sac_continuous_action")
    parser.add_argument("--env-id", default="Pendulum-v1")
    parser.add_argument("--total-timesteps", type=int, default=1500)
    parser.add_argument("--cleanrl-home", help="an upstream CleanRL checkout (its scripts do not pin threads)")
    parser.add_argument("--runs", type=int, default=2, help="runs at once (the daemon's --max-concurrent)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # bytecode written, as an installed package has it; no thread settings or host variables of this shell
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONDONTWRITEBYTECODE") and not k.startswith("MOSAIC_")
    }
    extras = {"cleanrl_home": str(Path(args.cleanrl_home).expanduser())} if args.cleanrl_home else {}
    config = {
        "worker": "cleanrl",
        "algo": args.algo,
        "env_id": args.env_id,
        "total_timesteps": args.total_timesteps,
        "extras": extras,
    }
    scratch = Path(tempfile.mkdtemp(prefix="mosaic-bench-concurrency-"))
    daemon = Daemon(scratch / "state", args.runs, env, [extras["cleanrl_home"]] if extras else [])
    walls: dict[int, list[float]] = {1: [], args.runs: []}
    cpus: dict[int, list[dict[str, float]]] = {1: [], args.runs: []}
    loads, by_hand, floors = [], [], []
    try:
        for _ in range(args.repeat):
            floors.append(machine_floor(args.runs))
            for runs in (1, args.runs):
                wall, cpu = one_round(daemon, config, runs)
                walls[runs].append(wall)
                cpus[runs].append(cpu)
                loads.append(os.getloadavg()[0])
            by_hand.append(direct_run(first_started(daemon.state), env))
    finally:
        daemon.close()
        shutil.rmtree(scratch, ignore_errors=True)
    alone = statistics.median(walls[1])
    hand_wall, hand_cpu = (statistics.median(values) for values in zip(*by_hand))
    print(
        f"{args.algo} on {args.env_id}, {args.total_timesteps} steps, through a daemon with --max-concurrent "
        f"{args.runs}; {len(os.sched_getaffinity(0))} usable CPUs, load {min(loads):.1f}-{max(loads):.1f} "
        f"(1-min averages); median of {args.repeat} rounds"
    )
    print(
        f"  {'':<16} {'wall s':>7} {'ratio':>6}   CPU s per run: {'training':>8} {'host':>6} {'daemon':>7}   "
        "MOSAIC's share (host + daemon + training beyond the script by hand)"
    )
    for runs in (1, args.runs):
        wall = statistics.median(walls[runs])
        per_run = {
            role: statistics.median(c[role] for c in cpus[runs]) / runs for role in ("training", "host", "daemon")
        }
        ours = per_run["host"] + per_run["daemon"] + max(0.0, per_run["training"] - hand_cpu)
        label = "1 run alone" if runs == 1 else f"{runs} runs at once"
        verdict = "" if runs == 1 else f"; goal <= {GOAL}x: {'ok' if wall / alone <= GOAL else 'OVER'}"
        print(
            f"  {label:<16} {wall:7.2f} {wall / alone:5.2f}x   {'':15}{per_run['training']:8.2f} "
            f"{per_run['host']:6.2f} {per_run['daemon']:7.2f}   {ours:.2f} s ({100 * ours / hand_cpu:.0f}% of "
            f"the training's own{verdict})"
        )
    print(
        f"  {'script by hand':<16} {hand_wall:7.2f} {hand_wall / alone:5.2f}x   {'':15}{hand_cpu:8.2f}   (the same "
        "script and arguments, no MOSAIC: the training's own CPU)"
    )
    print(
        f"  {'the cores alone':<16} {'':7} {statistics.median(floors):5.2f}x   ({args.runs} copies of a fixed Python "
        "loop at once vs one: what the machine gives any N processes now)"
    )


if __name__ == "__main__":
    main()
