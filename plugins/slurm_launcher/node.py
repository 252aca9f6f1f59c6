"""The job's side: ``python -I -m mosaic_slurm.node RUN_DIR --num-cpus $SLURM_CPUS_PER_TASK``
supervises the prepared run on the node (:mod:`mosaic_core.node`: the command ``launch.json``
records, not prepared again), its ``run_started`` naming the job. GPUs are the job's
(``CUDA_VISIBLE_DEVICES``, set by Slurm); SIGUSR1 before the time limit stops the run keeping it."""

from __future__ import annotations

import os
import socket
import sys

from mosaic_core import node_main


def started() -> dict:
    job = os.environ.get("SLURM_JOB_ID", "?")
    return {"node": f"slurm job {job} on {socket.gethostname()}",
            "slurm": {"job_id": job, "restart_count": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
                      "cpus": os.environ.get("SLURM_CPUS_PER_TASK"), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}}


if __name__ == "__main__":
    sys.exit(node_main(started=started(), prog="mosaic_slurm.node"))
