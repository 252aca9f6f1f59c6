"""The host CLI's start-up path imports nothing heavy (checked in a fresh interpreter)."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "gymnasium", "tensorboard", "wandb", "matplotlib", "grpc", "tensorboardX")

PROBE = """
import sys
from mosaic_core.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["workers"], ["--help"], ["plugins"], ["workers", "--json"]])
def test_no_heavy_import(argv):
    code = PROBE.format(argv=argv, heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = [l for l in result.stderr.splitlines() if l.startswith("HEAVY:")][-1]
    assert line == "HEAVY:", f"{argv} imported {line[6:]}"


def test_discovery_alone_is_light():
    code = ("import sys\nfrom mosaic_core.workers import discover_workers\nfrom mosaic_core.plugins import load_plugin_host\n"
            "discover_workers(); load_plugin_host()\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
