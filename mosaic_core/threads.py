"""Thread budgets: every run gets the number of threads it may use, from the CPUs it may use, so N
runs on N cores do not oversubscribe them (torch's default threading made two CleanRL runs 4x and
RLlib or XuanCe 40x slower while other work shared the cores).

The budget, first found wins:
1. the user's own ``OMP_NUM_THREADS`` in the host's environment (left as it is);
2. the run's ``--num-cpus N``;
3. ``$MOSAIC_CPU_SHARE``: the share a launcher of several runs gives each (the daemon: usable CPUs /
   ``--max-concurrent``; ``mosaic sweep run --parallel N``: usable CPUs / N);
4. one thread (a lone run): ``--num-cpus N`` asks for more.

Why one for a lone run, not every usable CPU: upstream CleanRL's TD3 on Pendulum through
``mosaic run`` (``bench/threads.py``, 2 cores) ran at 57 env steps/s with 1 thread and 4 with 2 at
load 8; the second thread's gain on a quiet machine is smaller than that loss (the figures, and
the quiet machine's, are in ``docs/benchmarks.md``). A machine's load changes during a run, so
no budget read from the load at its start would hold; one thread always does.

The training process gets it as ``OMP_NUM_THREADS`` (which torch also takes for its intra-op pool),
``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``NUMEXPR_NUM_THREADS`` — each only where neither
the user nor the worker's launch set it — and ``launch.json`` records it under ``threads``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

SHARE_VAR = "MOSAIC_CPU_SHARE"
LONE_RUN_THREADS = 1  # see the module docstring
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def share(concurrent: int) -> int:
    """Each run's CPUs when ``concurrent`` runs share this machine's usable CPUs (at least 1)."""
    return max(1, usable_cpus() // max(1, concurrent))


def _positive(raw: str | None) -> int | None:
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        return None
    return value if value >= 1 else None


@dataclass(frozen=True)
class ThreadBudget:
    threads: int
    source: str  # "OMP_NUM_THREADS", "--num-cpus", "MOSAIC_CPU_SHARE" or "lone run"

    def environment(self, environ: Mapping[str, str], launch_env: Mapping[str, str]) -> dict[str, str]:
        """The thread variables to add to the training process's environment."""
        return {name: str(self.threads) for name in THREAD_VARS if name not in environ and name not in launch_env}

    def record(self) -> dict[str, object]:
        return {"threads": self.threads, "source": self.source}


def budget(num_cpus: int | None = None, environ: Mapping[str, str] | None = None) -> ThreadBudget:
    """The run's thread budget (see the module docstring for the order)."""
    environ = os.environ if environ is None else environ
    own = _positive(environ.get("OMP_NUM_THREADS"))
    if own is not None:
        return ThreadBudget(own, "OMP_NUM_THREADS")
    if num_cpus is not None:
        return ThreadBudget(num_cpus, "--num-cpus")
    given = _positive(environ.get(SHARE_VAR))
    if given is not None:
        return ThreadBudget(given, SHARE_VAR)
    return ThreadBudget(LONE_RUN_THREADS, "lone run")


def pin_process_threads(requested: int | None = None) -> int:
    """In a training process, before torch is imported: the thread count every library of this
    process (and the processes it starts) uses — ``requested``, else the run's budget
    (``OMP_NUM_THREADS``), else 1 (torch's default threading made training 40x slower on a busy
    machine)."""
    threads = requested or _positive(os.environ.get("OMP_NUM_THREADS")) or 1
    for name in THREAD_VARS[:3]:
        os.environ[name] = str(threads)
    return threads
