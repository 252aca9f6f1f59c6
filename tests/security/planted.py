"""A folder like ``/tmp`` (root's, sticky, everyone may write) in which another local user (uid
65534) has planted modules a Python program would import if that folder were on its sys.path:
each, imported, leaves a marker file naming itself. Commands of ours are run from there (their
cwd) as the owner; afterwards :func:`markers` must be empty."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from tests.trainer.second_user import run_as_nobody

# Modules our programs (or what they start: venv, pip, Ray's workers, the training process)
# import by name, standard ones included: any of them found in the cwd would run as the owner.
MODULES = (
    "venv",
    "pip",
    "ensurepip",
    "sitecustomize",
    "usercustomize",
    "tyro",
    "gymnasium",
    "numpy",
    "torch",
    "json",
    "grpc",
    "optuna",
    "tensorboard",
)
PACKAGES = (
    "mosaic_ray",
    "mosaic_core",
    "cleanrl_worker",
    "mosaic_sweep",
    "mosaic_dashboard",
    "mosaic_fastlane",
    "mosaic_analytics",
    "ray_worker",
    "ray",
)

PLANT = r"""
import os, sys
folder, markers, modules, packages = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(",")
os.mkdir(markers)
os.chmod(markers, 0o777)
def payload(name):
    return (f"import os\nopen(os.path.join({markers!r}, {name!r} + '.' + str(os.getpid())), 'w')"
            f".write('imported by uid %d' % os.getuid())\n")
for name in modules:
    with open(os.path.join(folder, name + ".py"), "w") as handle:
        handle.write(payload(name))
for name in packages:
    os.mkdir(os.path.join(folder, name))
    with open(os.path.join(folder, name, "__init__.py"), "w") as handle:
        handle.write(payload(name))
print("planted")
"""


class PlantedFolder:
    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="mosaic-planted-"))
        self.path.chmod(0o1777)
        self.markers_dir = self.path / "markers"
        done = run_as_nobody(
            [
                sys.executable,
                "-I",
                "-c",
                PLANT,
                str(self.path),
                str(self.markers_dir),
                ",".join(MODULES),
                ",".join(PACKAGES),
            ]
        )
        assert done.returncode == 0 and "planted" in done.stdout, done.stderr

    def markers(self) -> dict[str, str]:
        """What was imported from the folder (``module.pid`` -> who imported it)."""
        return {p.name: p.read_text() for p in self.markers_dir.iterdir()}

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
