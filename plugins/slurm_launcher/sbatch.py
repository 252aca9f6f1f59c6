"""Slurm's own commands, used directly (``sbatch``, ``squeue``, ``scancel``): the settings
checked, the job's ``sbatch`` options, submission and the job's state.

Why not submitit: it pickles a Python callable to the shared filesystem and unpickles it on the
node (a pickle is code; one another user could swap runs as ours), and a run is a command line
already. The three commands are Slurm's stable interface, and ``sbatch --test-only`` gives
Slurm's own reason for a refusal without submitting anything."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from mosaic_core import UsageError

DEFAULT_GRACE_S = 120
COMMAND_TIMEOUT_S = 30.0
_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


@dataclass(frozen=True)
class Settings:
    """The launcher's settings, checked (``--slurm-*``, ``--num-cpus``, ``--num-gpus``)."""

    partition: str | None = None
    time: str | None = None
    mem: str | None = None
    account: str | None = None
    qos: str | None = None
    extra: tuple[str, ...] = ()
    grace_s: int = DEFAULT_GRACE_S
    array_limit: int | None = None
    detach: bool = False
    num_cpus: int = 1
    num_gpus: int = 0

    @classmethod
    def parse(cls, raw: dict[str, Any], num_cpus: int | None) -> Settings:
        try:
            extra = tuple(shlex.split(raw.get("slurm_extra") or ""))
        except ValueError as exc:
            raise UsageError(f"--slurm-extra {raw.get('slurm_extra')!r}: {exc}") from None
        grace = _whole("--slurm-grace", raw.get("slurm_grace"), DEFAULT_GRACE_S, minimum=1)
        time = (raw.get("slurm_time") or "").strip() or None
        if time is not None:
            limit = time_seconds(time)
            if limit is None:
                raise UsageError(f"--slurm-time {time!r}: expected MINUTES, HH:MM:SS, D-HH or D-HH:MM:SS")
            if limit <= grace:
                raise UsageError(
                    f"--slurm-time {time} is not longer than the grace period ({grace} s, --slurm-grace): "
                    "the run would be signalled to stop before it starts"
                )
        return cls(
            partition=_text(raw.get("slurm_partition")),
            time=time,
            mem=_text(raw.get("slurm_mem")),
            account=_text(raw.get("slurm_account")),
            qos=_text(raw.get("slurm_qos")),
            extra=extra,
            grace_s=grace,
            array_limit=_whole("--slurm-array-limit", raw.get("slurm_array_limit"), None, 1),
            detach=bool(raw.get("detach")),
            num_cpus=num_cpus or 1,
            num_gpus=_whole("--num-gpus", raw.get("num_gpus"), 0, minimum=0),
        )

    def options(self, preemptible: bool = True) -> list[str]:
        """The job's ``sbatch`` options (resources, placement, preemption), without its files.
        ``preemptible``: requeued after a preemption, SIGUSR1 to its script ``grace_s`` before the end."""
        out = ["--ntasks=1", f"--cpus-per-task={self.num_cpus}"]
        if preemptible:
            out += ["--requeue", f"--signal=B:USR1@{self.grace_s}"]
        for flag, value in (
            ("--partition", self.partition),
            ("--time", self.time),
            ("--mem", self.mem),
            ("--account", self.account),
            ("--qos", self.qos),
        ):
            if value:
                out.append(f"{flag}={value}")
        if self.num_gpus:
            out.append(f"--gres=gpu:{self.num_gpus}")
        return [*out, *self.extra]


def _text(value: Any) -> str | None:
    return str(value).strip() or None if value not in (None, "") else None


def _whole(flag: str, value: Any, default: int | None, minimum: int) -> Any:
    if value in (None, ""):
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise UsageError(f"{flag} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise UsageError(f"{flag} must be at least {minimum}, got {number}")
    return number


def time_seconds(text: str) -> int | None:
    """Seconds in a Slurm time limit (sbatch --time's formats), or None if it is not one."""
    match = _TIME.fullmatch(text.strip())
    if not match:
        return None
    days, a, b, c = (int(part) if part else None for part in match.groups())
    a = a or 0  # the one group the pattern always has
    if days is not None:  # D-H, D-H:M, D-H:M:S
        return days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    if b is None:  # M
        return a * 60
    if c is None:  # M:S
        return a * 60 + b
    return a * 3600 + b * 60 + c  # H:M:S


def command(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UsageError(
            f"the Slurm launcher needs `{name}`, which is not on PATH (run on a Slurm login node, "
            "or put Slurm's client commands on PATH)"
        )
    return found


def validate(raw: dict[str, Any], num_cpus: int | None) -> list[str]:
    """The seam's check: settings well formed, ``sbatch`` on PATH, and Slurm accepting such a
    job (``sbatch --test-only``: partition, account, QOS, resources, time), nothing submitted."""
    settings = Settings.parse(raw, num_cpus)
    refusal = test_only(settings)
    return [refusal] if refusal else []


def test_only(settings: Settings, array: str | None = None) -> str | None:
    """Slurm's reason for refusing such a job, quoted, or None when it would take it."""
    argv = [
        command("sbatch"),
        "--test-only",
        *settings.options(),
        *([f"--array={array}"] if array else []),
        "--output=/dev/null",
        "--wrap=true",
    ]
    done = _run(argv)
    if done.returncode == 0:
        return None
    return f"Slurm refuses the job ({' '.join(settings.options())}): {reason(done.stderr)}"


def reason(stderr: str) -> str:
    """Slurm's own words, one line: its error lines without the ``sbatch: error:`` prefixes."""
    lines = [
        re.sub(r"^((sbatch|squeue|scancel): error|allocation failure):\s*", "", line.strip())
        for line in stderr.splitlines()
        if line.strip()
    ]
    text = "; ".join(dict.fromkeys(line for line in lines if line))
    return repr(text[:400]) if text else "no reason given"


def submit(
    settings: Settings,
    script: str,
    output: str,
    error: str,
    env: dict[str, str],
    name: str,
    array: str | None = None,
    preemptible: bool = True,
) -> str:
    """Submit ``script`` (its text, handed to ``sbatch`` on stdin: no path anyone could swap
    between writing and reading it) and return the job id (with an array: the array's id)."""
    argv = [
        command("sbatch"),
        "--parsable",
        f"--job-name={name}",
        f"--output={output}",
        f"--error={error}",
        "--open-mode=append",
        "--export=ALL",
        *settings.options(preemptible),
        *([f"--array={array}"] if array else []),
    ]
    done = _run(argv, env, stdin=script)
    if done.returncode != 0:
        raise UsageError(f"Slurm refused the job: {reason(done.stderr)}")
    return done.stdout.strip().split(";")[0]


def states(job_id: str) -> dict[str, str]:
    """Job (or array task) id -> state for what Slurm still has pending or running; {} when gone."""
    done = _run([command("squeue"), "-h", "-j", job_id, "-o", "%i %T"])
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return {}
        raise RuntimeError(f"squeue failed: {reason(done.stderr)}")
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if " " in line.strip())


def cancel(job_id: str, signal_name: str | None = None) -> None:
    """``scancel`` the job; with ``signal_name``, only signal its batch script (the run's host)."""
    argv = [command("scancel"), *(["--batch", f"--signal={signal_name}"] if signal_name else []), job_id]
    _run(argv)


def requeue(job_id: str) -> None:
    """``scontrol requeue`` the job (from inside it: an attempt that ended resumable at its time
    limit); it waits in the queue and its next attempt resumes the run."""
    done = _run([command("scontrol"), "requeue", job_id])
    if done.returncode != 0:
        print(
            f"mosaic: the run ended resumable but Slurm did not requeue job {job_id}: {reason(done.stderr)}",
            file=sys.stderr,
            flush=True,
        )


def _run(argv: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        if stdin is None:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL
            )
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, input=stdin)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"`{' '.join(argv[:2])}` got no answer from Slurm within {COMMAND_TIMEOUT_S:g} s (is slurmctld up?)"
        ) from None
