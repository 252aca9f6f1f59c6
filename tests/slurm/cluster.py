"""A real one-node Slurm cluster for the tests: munged with its own key and socket, slurmctld
and slurmd in the foreground (our children, stopped by pid), state and spool under one folder,
ports that were free. Debian's slurm-wlm (22.05) as root: it starts in seconds in this VM."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 60.0
DAEMONS = ("munged", "slurmctld", "slurmd")


def why_not_here() -> str | None:
    """Why no cluster can start on this machine, or None."""
    missing = [name for name in (*DAEMONS, "mungekey", "sbatch", "sinfo") if not shutil.which(name, path=_path())]
    if missing:
        return f"slurm-wlm is not installed (no {', '.join(missing)}; `apt-get install slurm-wlm`)"
    if os.geteuid() != 0:
        return "starting slurmd needs root (it runs jobs as their users)"
    return None


def _path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmCluster:
    def __init__(self, root: Path, cpus: int = 2):
        self.root, self.cpus = root, cpus
        self.conf = root / "slurm.conf"
        self.socket = root / "munge.socket"
        self.node = socket.gethostname().split(".")[0]
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, `mosaic run --launcher slurm`) needs to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munged: the socket's folder must be searchable by everyone
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(exist_ok=True)
        key = self.root / "munge.key"
        subprocess.run(
            ["mungekey", "--create", "--keyfile", str(key)], check=True, capture_output=True, env=self._env()
        )
        key.chmod(0o600)
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                "--socket",
                str(self.socket),
                f"--key-file={key}",
                f"--pid-file={self.root / 'munged.pid'}",
                f"--log-file={self.root / 'munged.log'}",
                f"--seed-file={self.root / 'munged.seed'}",
            ],
        )
        self._wait(lambda: self.socket.exists(), "munged's socket")
        self.conf.write_text(self._conf(_free_port(), _free_port()))
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(self.idle, f"node {self.node} idle in sinfo")

    def _conf(self, ctld_port: int, slurmd_port: int) -> str:
        r = self.root
        return f"""ClusterName=mosaictest
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
StateSaveLocation={r / "state"}
SlurmdSpoolDir={r / "spool"}
SlurmctldPidFile={r / "slurmctld.pid"}
SlurmdPidFile={r / "slurmd.pid"}
SlurmctldLogFile={r / "slurmctld.log"}
SlurmdLogFile={r / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=300
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""

    def _env(self) -> dict[str, str]:
        return {**os.environ, "PATH": _path(), **self.env()}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.out", "ab")
        try:
            self.procs[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        finally:
            log.close()

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [name for name, proc in self.procs.items() if proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = {name: (self.root / f"{name}.out").read_text(errors="replace")[-800:] for name in self.procs}
                raise RuntimeError(f"Slurm test cluster: no {what} ({', '.join(dead) or 'timeout'} ): {logs}")
            time.sleep(0.2)

    def sinfo(self) -> str:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self._env())
        return done.stdout.strip()

    def idle(self) -> bool:
        return self.sinfo() == "idle"

    def jobs(self) -> list[str]:
        """Every job Slurm still has pending or running, as 'ID STATE NAME'."""
        done = subprocess.run(["squeue", "-h", "-o", "%i %T %j"], capture_output=True, text=True, env=self._env())
        return [line for line in done.stdout.splitlines() if line.strip()]

    def scontrol(self, *args: str) -> str:
        done = subprocess.run(["scontrol", *args], capture_output=True, text=True, env=self._env(), check=True)
        return done.stdout

    def stop(self) -> list[str]:
        """Every daemon stopped (SIGTERM, then SIGKILL), slurmd first; what would not stop."""
        left = []
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
                left.append(name)
        return left
