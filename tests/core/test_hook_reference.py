"""The generated hook reference (``docs/hooks.md``) is up to date, every hook has an example
and a test of its own, and the public names are importable from the top package, lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mosaic_core import hookdocs, hookspecs

ROOT = Path(__file__).parents[2]


def test_the_committed_hook_reference_is_up_to_date():
    committed = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert committed == hookdocs.render(), "run: python -m mosaic_core.hookdocs > docs/hooks.md"
    for name in hookspecs.HOOK_NAMES:
        section = committed.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "**Example:**" in section and "@hookimpl" in section and f"`{hookspecs.POLICY[name]}`" in section


def test_every_hook_has_a_test():
    tests = "\n".join(
        path.read_text(encoding="utf-8")
        for path in (ROOT / "tests").rglob("test_*.py")
        if path.name != Path(__file__).name
    )
    untested = [name for name in hookspecs.HOOK_NAMES if name not in tests]
    assert untested == []


def test_the_public_names_come_from_the_top_package_without_importing_anything_else():
    code = (
        "import sys, mosaic_core\n"
        "assert not [m for m in sys.modules if m.startswith('mosaic_core.') or m == 'pluggy'], sys.modules\n"
        "from mosaic_core import hookimpl, ExtrasKey, ChildEvent, CodePath, Launch, FrameInfo, Worker, \\\n"
        "    WorkerMetadata, WorkerCapabilities, TrackingSettings, WorkerForm, FormOption, CliCommand\n"
        "from mosaic_core.hookspecs import hookimpl as marker\n"
        "assert hookimpl is marker and Launch.__module__ == 'mosaic_core.types'\n"
        "heavy = [m for m in ('torch', 'wandb', 'matplotlib', 'tensorboard', 'numpy') if m in sys.modules]\n"
        "assert heavy == [], heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
