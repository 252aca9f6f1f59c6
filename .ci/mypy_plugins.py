"""mypy over the plugins and the example package (``make lint``), not strict: the core is strict
(``[tool.mypy]``), a plugin is held to mypy's default checks (``[[tool.mypy.overrides]]`` relaxes
the strict ones for their modules). Each package is checked under its import name
(``mosaic_fastlane`` lives in ``plugins/fastlane``: pyproject's ``package-dir``) through a link in
``var/mypy/``, so mypy resolves the imports as Python does. Every package is checked, the workers and
launchers too; the libraries that are not in the host's venv (Ray's RLlib, XuanCe, EnvPool, procgen)
or ship no types are listed in pyproject's overrides (``ignore_missing_imports``), nothing else::

    python .ci/mypy_plugins.py
"""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINKS = ROOT / "var" / "mypy"


def packages() -> dict[str, Path]:
    """Import name -> folder: pyproject's ``package-dir`` and the example package."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {name: ROOT / folder for name, folder in setuptools["package-dir"].items()}
    found["mosaic_example_plugin"] = ROOT / "examples" / "mosaic_example_plugin" / "mosaic_example_plugin"
    return found


def main() -> int:
    every = packages()
    LINKS.mkdir(parents=True, exist_ok=True)
    for name, folder in every.items():
        link = LINKS / name
        if link.is_symlink() and os.readlink(link) != str(folder):
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(folder)
    args = [sys.executable, "-m", "mypy", *(f"-p{name}" for name in sorted(every))]
    env = {**os.environ, "MYPYPATH": str(LINKS)}
    return subprocess.run(args, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
