"""Issue 47, item 1: a Slurm sweep runs the owner's job array only. On the real one-node cluster
(tests/slurm/cluster.py; skipped where slurm-wlm is not installed), the owner (root) runs
``mosaic sweep run SPEC --launcher slurm --runs-dir SHARED/runs`` where SHARED is like ``/tmp``
(root's, sticky, everyone may write) and SPEC lies in a project folder everyone may write. Another
local user (uid 65534, ``setpriv``) made ``SHARED/sweeps/`` (where the array's folder used to go,
accepted as it was) and renames away whatever appears in it, putting in a folder of theirs whose
``array.sh`` leaves a marker (this ran as root 2 times of 2 before); once the array waits in the
queue, they swap the spec for one naming their script. Now:

* the array's folder is a new 0700 folder of the checked runs root (``.jobs/``), which they
  cannot even list; nothing of the owner's lands in their ``sweeps/``;
* Slurm got the script on ``sbatch``'s stdin: the script it holds for the array is the owner's
  ``array.sh``, byte for byte (``scontrol write batch_script``);
* the tasks read the copy of the spec in the array's folder: every trial trained the owner's
  algorithm on the owner's env, and no marker exists;
* a runs root another user made is refused in one line before anything is submitted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, HOST_VARS
from tests.slurm.conftest import no_jobs_left, slurm  # noqa: F401 (the one-node cluster)
from tests.trainer.second_user import AS_NOBODY, NOBODY, needs_second_user, run_as_nobody

pytestmark = needs_second_user
optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")

SPEC = """
study_name = "shared-sweep"
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 512
seeds = 1
max_trials = 2

[objective]
metric = "charts/episodic_return"
last_n = 5

[sampler]
type = "random"
seed = 0

[pruner]
type = "none"

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
"""

# The attacker. Plants SHARED/sweeps (0777) and a payload folder per steal; until told to stop:
# every folder in sweeps/ that is not theirs is renamed aside and a payload put in its place; the
# runs root's .jobs/ is listed (to show it cannot be); on SHARED/go the spec is swapped for one
# naming their script. Prints what it did as JSON.
ATTACK = r"""
import errno, json, os, sys, time
shared, spec, marker = sys.argv[1:4]
sweeps, evil = os.path.join(shared, "sweeps"), os.path.join(shared, "evil")
for folder in (sweeps, evil):
    os.mkdir(folder)
    os.chmod(folder, 0o777)
script = os.path.join(evil, "evil.py")
with open(script, "w") as handle:
    handle.write(f"import os\nopen({marker!r}, 'w').write('evil.py ran as uid %d' % os.getuid())\n")
def payload(index):
    folder = os.path.join(evil, f"payload-{index}")
    os.mkdir(folder)
    path = os.path.join(folder, "array.sh")
    with open(path, "w") as handle:
        handle.write(f"#!/bin/bash\necho \"array.sh of uid 65534 ran as uid $(id -u)\" > {marker}\n")
    os.chmod(path, 0o755)
    os.chmod(folder, 0o777)
    return folder
report = {"stolen": 0, "swapped": False, "jobs_folder": None}
print("ready", flush=True)
deadline = time.time() + 600
while time.time() < deadline and not os.path.exists(os.path.join(shared, "stop")):
    for name in os.listdir(sweeps):
        path = os.path.join(sweeps, name)
        try:
            if not name.startswith(".stolen-") and os.lstat(path).st_uid != os.getuid():
                os.rename(path, os.path.join(sweeps, f".stolen-{report['stolen']}"))  # same folder: allowed
                os.rename(payload(report["stolen"]), path)
                report["stolen"] += 1
        except OSError:
            pass
    try:
        os.listdir(os.path.join(shared, "runs", ".jobs"))
        report["jobs_folder"] = "listed"
    except OSError as exc:
        report["jobs_folder"] = errno.errorcode.get(exc.errno, str(exc.errno))
    if os.path.exists(os.path.join(shared, "go")) and not report["swapped"]:
        text = open(spec).read().replace('algo = "ppo"', f"algo = {script!r}").replace("CartPole-v1", "Acrobot-v1")
        os.rename(spec, spec + ".owners")
        with open(spec, "w") as handle:
            handle.write(text)
        report["swapped"] = True
        open(os.path.join(shared, "swapped"), "w").close()
    time.sleep(0.001)
print(json.dumps(report), flush=True)
"""


@pytest.fixture
def shared() -> Path:
    """A folder like /tmp: root's, sticky, writable by everyone; a project folder in it that
    everyone may write too (a group's shared folder)."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-slurm-shared-"))
    path.chmod(0o1777)
    (path / "project").mkdir()
    (path / "project").chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in HOST_VARS}


def sweep_command(spec: Path, storage: str, runs: Path, *extra: str) -> list[str]:
    return [
        str(BIN / "mosaic"),
        "sweep",
        "run",
        str(spec),
        "--storage",
        storage,
        "--runs-dir",
        str(runs),
        "--launcher",
        "slurm",
        *extra,
    ]


def wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout:g} s")


def test_a_sweeps_job_array_runs_the_owners_script_and_spec_only(slurm, no_jobs_left, shared, tmp_path):  # noqa: F811
    spec = shared / "project" / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    marker = shared / "pwned"
    attacker = subprocess.Popen(
        [*AS_NOBODY, sys.executable, "-I", "-c", ATTACK, str(shared), str(spec), str(marker)],
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert attacker.stdout.readline().strip() == "ready", attacker.stderr.read()
        storage = f"sqlite:///{tmp_path / 'study.db'}"
        runs = shared / "runs"
        owner = subprocess.Popen(
            sweep_command(spec, storage, runs, "--slurm-extra=--begin=now+6"),  # the array waits in the queue
            cwd=tmp_path,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def queued() -> list[str]:
            assert owner.poll() is None, owner.communicate()[1][-3000:]
            return [line.split()[0].split("_")[0] for line in slurm.jobs()]

        array = wait_for(queued, "job array in squeue")[0]
        held = slurm.scontrol("write", "batch_script", array, "-")  # the script Slurm will run
        (shared / "go").touch()  # the array waits: now the attacker swaps the spec
        wait_for(lambda: (shared / "swapped").exists(), "spec swapped by the attacker", timeout=30)
        out, err = owner.communicate(timeout=600)
    finally:
        (shared / "stop").touch()
        report, attack_err = attacker.communicate(timeout=60)
    assert not marker.exists(), marker.read_text()  # nothing of uid 65534 ran, as root or at all
    assert owner.returncode == 0, err[-3000:]
    assert f"2 commands as Slurm job array {array} (0-1)" in err, err[-3000:]
    done = json.loads(report.strip().splitlines()[-1])
    assert done["swapped"] and done["jobs_folder"] == "EACCES", (done, attack_err)

    # the array's folder: new, 0700, root's, in the runs root; the script Slurm held is ours
    (folder,) = (runs / ".jobs").iterdir()
    for path in (runs / ".jobs", folder):
        info = os.lstat(path)
        assert info.st_uid == 0 and (info.st_mode & 0o777) == 0o700, path
    assert held == (folder / "array.sh").read_text(), held
    assert (folder / "spec.toml").read_text() == SPEC  # the tasks' copy: the spec the owner checked
    assert sorted(p.name for p in folder.glob("task-*.rc")) == ["task-0.rc", "task-1.rc"]
    assert all((folder / f"task-{i}.rc").read_text().strip() == "0" for i in range(2))
    assert done["stolen"] == 0 and not list((shared / "sweeps").iterdir())  # nothing of the owner's went there

    # every trial trained the owner's algorithm on the owner's env; nothing of uid 65534 ran
    run_dirs = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert len(run_dirs) == 2, sorted(p.name for p in runs.iterdir())
    for run_dir in run_dirs:
        config = json.loads((run_dir / "config.json").read_text())
        assert (config["algo"], config["env_id"]) == ("ppo", "CartPole-v1"), config
        assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    study = optuna.load_study(study_name="shared-sweep", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]


def test_a_runs_root_another_user_made_is_refused_before_anything_is_submitted(
    slurm,  # noqa: F811
    no_jobs_left,  # noqa: F811
    shared,
    tmp_path,
):
    theirs = shared / "runs"
    planted = run_as_nobody([sys.executable, "-I", "-c", "import os, sys; os.mkdir(sys.argv[1], 0o700)", str(theirs)])
    assert planted.returncode == 0, planted.stderr
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    result = subprocess.run(
        sweep_command(spec, f"sqlite:///{tmp_path / 'study.db'}", theirs),
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(theirs) in lines[0] and "nobody" in lines[0], lines[0]
    assert not slurm.jobs() and os.lstat(theirs).st_uid == NOBODY
    assert not re.search(r"job array \d+", result.stderr)
