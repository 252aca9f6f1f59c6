"""Acting as a second local user (uid/gid 65534) next to a daemon the test runs as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SETPRIV = shutil.which("setpriv")
NOBODY = 65534
needs_second_user = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None,
    reason="acting as a second user needs root and setpriv (util-linux) to drop to uid 65534",
)
AS_NOBODY = [str(SETPRIV), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

# The attacker: every control call the daemon offers, with no token and with a guessed one,
# plus reads of the daemon's files. Prints {attempt: "OK" | status code name | errno name}.
ATTACK = r"""
import errno, json, sys
import grpc
from mosaic_core.trainer import trainer_pb2 as pb, trainer_pb2_grpc as pb_grpc
target, victim, script, *files = sys.argv[1:]
stub = pb_grpc.TrainerServiceStub(grpc.insecure_channel(target))
found = {}
def attempt(name, call):
    try:
        call()
        found[name] = "OK"
    except grpc.RpcError as exc:
        found[name] = exc.code().name
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
config = json.dumps({"algo": script, "env_id": "CartPole-v1", "total_timesteps": 10})
for label, metadata in (("", []), (" with a guessed token", [("authorization", "Bearer guess")])):
    attempt("SubmitRun" + label, lambda: stub.SubmitRun(pb.SubmitRunRequest(config_json=config), timeout=10, metadata=metadata))
    attempt("CancelRun" + label, lambda: stub.CancelRun(pb.CancelRunRequest(run_id=victim), timeout=10, metadata=metadata))
    attempt("ListRuns" + label, lambda: stub.ListRuns(pb.ListRunsRequest(), timeout=10, metadata=metadata))
    attempt("RemoveRun" + label, lambda: stub.RemoveRun(pb.RemoveRunRequest(run_id=victim), timeout=10, metadata=metadata))
    attempt("WatchRuns" + label, lambda: next(stub.WatchRuns(pb.WatchRunsRequest(), timeout=5, metadata=metadata)))
    attempt("StreamRunSteps" + label, lambda: list(stub.StreamRunSteps(pb.StreamStepsRequest(run_id=victim), timeout=5, metadata=metadata)))
    attempt("ListWorkers" + label, lambda: stub.ListWorkers(pb.ListWorkersRequest(), timeout=10, metadata=metadata))
attempt("RegisterWorker", lambda: stub.RegisterWorker(pb.RegisterWorkerRequest(
    run_id=victim, proto_version="MOSAIC/1.0", worker_kind="cleanrl"), timeout=10))
attempt("GetHealth", lambda: stub.GetHealth(pb.HealthCheckRequest(), timeout=10))
for path in files:
    attempt("read " + path, lambda: open(path, "rb").read())
print(json.dumps(found))
"""


def run_as_nobody(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*AS_NOBODY, *argv], cwd="/", env=env, capture_output=True, text=True, timeout=120, **kwargs)


def attack(target: str, victim: str, script: str, files: list[Path]) -> dict[str, str]:
    """Run :data:`ATTACK` as uid 65534; returns what each attempt got."""
    result = run_as_nobody([sys.executable, "-c", ATTACK, target, victim, script, *map(str, files)])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
