"""Where a test lane's CPU-seconds go: by kind of process, by test module and by test. Run by hand, as root
(kernel process accounting, acct(2)), on an otherwise quiet machine:

    python3 .ci/lane_cpu.py -- make test PYTEST_ARGS=-p\\ no:cacheprovider

The lanes are CPU-bound (three pytest processes on two cores), so CPU-seconds, not a test's
wall-clock seconds, are what a cut saves. Every process that ends while the command runs is
accounted for by the kernel, however short-lived; a sampler reads each new process's command
line and the test that started it (``PYTEST_CURRENT_TEST``, inherited by the processes a test
starts; a process without it counts for its parent's test) every 0.2 s. A process gone before the
sampler saw it counts by its kernel name, for its parent's test. The test column is approximate: an
environment a session fixture built once (``rllib_env``, ``xuance_env``) names the test that built it,
and a short process the sampler missed may count for no test. The tables go to stdout, the
command's own output to stderr.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

# (kind, pattern on the command line with the venvs' paths shortened), the first match wins
KINDS = [
    ("load (busy loop)", r"while True: pass"),
    ("pytest process", r"exec\(eval\(sys\.stdin|-m pytest"),
    ("CleanRL training", r"cleanrl_worker\.launch|cleanrl_worker/algorithms/\w+\.py"),
    ("CleanRL evaluation, play, serving", r"cleanrl_worker\.\w+"),
    ("RLlib config check", r"ray_worker\.configs"),
    ("RLlib driver", r"ray_worker\.train"),
    ("RLlib serving, evaluation", r"ray_worker\.\w+"),
    ("Ray worker (env runner, task)", r"ray::|default_worker\.py"),
    ("Ray system (GCS, raylet, agents)", r"gcs_server|raylet|dashboard|log_monitor|monitor\.py|runtime_env|ray start"),
    ("XuanCe", r"xuance_worker"),
    ("example worker", r"mosaic_example_plugin"),
    ("host CLI", r"(\] |/)mosaic |mosaic_core\.\w+"),
    ("Slurm", r"slurm|munged|srun|sbatch|scontrol|squeue"),
    ("PostgreSQL", r"postgres"),
    ("Chromium", r"chrom|playwright|node "),
]
VENV = re.compile(r"\S*/(?:venvs/)?(\w+)-[0-9a-f]{12}/(?:bin|lib/python3\.\d+/site-packages)/")
PROGRAM = re.compile(r"^(\[\w+\] )?(\S*python[\d.]*\s+(-[^c\s]\S*\s+)*)?")  # what a python runs, or the program
ACCT_V3 = struct.Struct("<BBHIIIIIIfHH")  # struct acct_v3 up to ac_stime; ac_comm is bytes 48-64
RECORD = 64


def main(argv: list[str]) -> int:
    if argv[:1] != ["--"] or len(argv) < 2:
        sys.exit(__doc__)
    with tempfile.NamedTemporaryFile(prefix="lane-acct-") as acct_file:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.acct(acct_file.name.encode()) != 0:
            sys.exit(f"acct(2): {os.strerror(ctypes.get_errno())} (needs root)")
        try:
            seen, code = _sample_while(subprocess.Popen(argv[1:], stdout=sys.stderr))
        finally:
            libc.acct(None)
        ended = _accounted(acct_file.read())
    rows = _joined(ended, seen)
    # The rows, for another look (_report(json.load(...))), in a new file of our own (mkstemp: O_EXCL,
    # mode 0600), never a path another user of /tmp could have planted a link at.
    fd, kept = tempfile.mkstemp(prefix="lane-cpu-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump(rows, out)
    print(f"rows kept in {kept}", file=sys.stderr)
    _report(rows)
    return code


def _sample_while(proc: subprocess.Popen) -> tuple[dict[tuple[int, float], tuple[int, str, str]], int]:
    """{(pid, start): (ppid, command line, test)} of every process seen while ``proc`` runs."""
    boot = int(next(line for line in open("/proc/stat") if line.startswith("btime")).split()[1])
    seen: dict[tuple[int, float], tuple[int, str, str]] = {}
    live: dict[str, float] = {}
    while proc.poll() is None:
        now = {entry for entry in os.listdir("/proc") if entry.isdigit()}
        for pid in now - live.keys():
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                command = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            test = next((v[20:].decode(errors="replace") for v in environ if v.startswith(b"PYTEST_CURRENT_TEST=")), "")
            live[pid] = start = boot + int(fields[19]) / 100
            seen[(int(pid), start)] = (int(fields[1]), command, test.rsplit(" (", 1)[0])
        for pid in live.keys() - now:
            del live[pid]
        time.sleep(0.2)
    return seen, proc.returncode


def _accounted(data: bytes) -> list[tuple[int, int, float, float, str]]:
    """(pid, ppid, start, CPU-seconds, kernel name) of each process that ended, from acct_v3 records."""

    def seconds(comp_t: int) -> float:  # 13-bit mantissa, 3-bit base-8 exponent, in 1/100 s
        return ((comp_t & 0x1FFF) << (3 * (comp_t >> 13))) / 100

    ended = []
    for at in range(0, len(data) - RECORD + 1, RECORD):
        *_, pid, ppid, btime, _etime, utime, stime = ACCT_V3.unpack_from(data, at)
        name = data[at + 48 : at + 64].split(b"\0")[0].decode(errors="replace")
        ended.append((pid, ppid, float(btime), seconds(utime) + seconds(stime), name))
    return ended


def _joined(ended, seen) -> list[tuple[float, str, str, str]]:
    """(CPU-seconds, kind, test module, test) of each ended process."""
    by_pid = collections.defaultdict(list)
    for (pid, start), value in seen.items():
        by_pid[pid].append((start, *value))

    def sighting(pid: int, start: float):  # acct's start is whole seconds
        near = [s for s in by_pid.get(pid, ()) if abs(s[0] - start) <= 2]
        return min(near, key=lambda s: abs(s[0] - start)) if near else None

    def test_of(pid: int, start: float, depth: int = 0) -> str:
        found = sighting(pid, start)
        if found is None or depth > 20:
            return ""
        _start, ppid, _command, test = found
        return test or test_of(ppid, found[0], depth + 1)

    rows = []
    for pid, ppid, start, cpu, name in ended:
        found = sighting(pid, start)
        command = VENV.sub(r"[\1] ", found[2]) if found else ""
        kind = next((k for k, pattern in KINDS if re.search(pattern, command)), None)
        program = PROGRAM.sub("", command).split(" ", 1)[0].rsplit("/", 1)[-1]
        kind = kind or (f"other: {program}" if program else f"unseen: {name}")
        test = test_of(pid, start) or test_of(ppid, start) or "(no test)"
        rows.append((cpu, kind, test.split("::")[0], test))
    return rows


def _report(rows: list[tuple[float, str, str, str]]) -> None:
    total = sum(row[0] for row in rows)
    print(f"{total:.0f} CPU-s in {len(rows)} processes")
    for column, title in (
        (1, "kind of process"),
        (2, "test module"),
        (3, "test (a fixture's processes count for the test that made it)"),
    ):
        cpu, count = collections.Counter(), collections.Counter()
        for row in rows:
            cpu[row[column]] += row[0]
            count[row[column]] += 1
        print(f"\n{'CPU-s':>8} {'share':>6} {'procs':>6}  {title}")
        for key, seconds in cpu.most_common(40):
            print(f"{seconds:8.1f} {seconds / total:6.1%} {count[key]:6d}  {key}")
    kinds = collections.Counter()
    for cpu_s, kind, *_ in rows:
        kinds[kind] += cpu_s
    for kind, _ in kinds.most_common(3):  # where the costliest kinds of process come from
        cpu, count = collections.Counter(), collections.Counter()
        for row in rows:
            if row[1] == kind:
                cpu[row[2]] += row[0]
                count[row[2]] += 1
        print(f"\n{'CPU-s':>8} {'procs':>6}  {kind}: by test module")
        for key, seconds in cpu.most_common(25):
            print(f"{seconds:8.1f} {count[key]:6d}  {key}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
