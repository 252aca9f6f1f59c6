"""Which test modules of the gymnasium 1.x lane meet gymnasium: the Makefile's GYM1_HOST_ONLY lists
the others. Run by hand after adding tests (a few minutes; needs the lane's venv, `make .venv-gym1/.installed`):

    .venv-gym1/bin/python .ci/gym1_trace.py tests/core tests/cleanrl ...

It runs those tests on the lane's venv with two probes: an import hook in every Python process
(a .pth file in the venv for the run; children inherit PYTEST_CURRENT_TEST, so a training process
started by a test names it) and, in the pytest process, a profile hook that sees calls into
gymnasium. A module none of whose tests meets gymnasium either way is printed.
"""

from __future__ import annotations

import collections
import os
import re
import site
import subprocess
import sys
import tempfile
from pathlib import Path

LOG_VAR = "MOSAIC_GYM1_TRACE"


class _ImportProbe:
    """Notes the current test when this process first imports gymnasium."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "gymnasium":
            sys.meta_path.remove(self)
            _note(os.environ.get("PYTEST_CURRENT_TEST", "-"))
        return None


def _note(test: str) -> None:
    with open(os.environ[LOG_VAR], "a", encoding="utf-8") as log:
        log.write(re.sub(r" \((setup|call|teardown)\)$", "", test) + "\n")


def probe_imports() -> None:
    """Called from the .pth file in every Python process of the traced run."""
    if os.environ.get(LOG_VAR):
        sys.meta_path.insert(0, _ImportProbe())


# The pytest plugin (-p gym1_trace): calls into gymnasium in the pytest process, per test.
_current: list[str] = []


def _profile(frame, event, arg):
    if event == "call" and "/gymnasium/" in frame.f_code.co_filename:
        sys.setprofile(None)
        _note(_current[0])


def pytest_runtest_logstart(nodeid, location):
    _current[:] = [nodeid]
    sys.setprofile(_profile)


def pytest_runtest_logfinish(nodeid, location):
    sys.setprofile(None)


def main(paths: list[str]) -> int:
    pth = Path(site.getsitepackages()[0]) / "zz_mosaic_gym1_trace.pth"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "met.log"
        env = {**os.environ, LOG_VAR: str(log)}
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *paths]
        collected = subprocess.run([*pytest, "--collect-only"], env=env, capture_output=True, text=True)
        # sys.path left as it is (tests check what the processes they start put there)
        pth.write_text(
            "import sys, importlib.util as u; s = u.spec_from_file_location('gym1_trace', "
            f"{os.path.abspath(__file__)!r}); m = sys.modules['gym1_trace'] = u.module_from_spec(s); "
            "s.loader.exec_module(m); m.probe_imports()\n"
        )
        try:
            subprocess.run([*pytest, "-p", "gym1_trace", "-W", "ignore::pytest.PytestAssertRewriteWarning"], env=env)
        finally:
            pth.unlink()
        met = set(log.read_text().split("\n")) if log.exists() else set()
    tests = collections.defaultdict(list)
    for line in collected.stdout.splitlines():
        if "::" in line:
            tests[line.split("::")[0]].append(line.strip())
    for module, ids in sorted(tests.items()):
        if not met.intersection(ids):
            print(module)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
