"""`mosaic sweep` adds no weight to other commands: Optuna, SQLAlchemy and the training stack
are imported only when a sweep command runs. And `dashboard` without optuna-dashboard."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.sweep.conftest import sweep

HEAVY = ("optuna", "sqlalchemy", "psycopg", "torch", "tensorboard", "matplotlib")
PROBE = """
import sys
from mosaic_core.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
print("HEAVY:" + ",".join(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["sweep", "run", "--help"], ["workers"]])
def test_help_and_other_commands_import_no_optuna(argv):
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True, timeout=60
    )
    line = [l for l in result.stderr.splitlines() if l.startswith("HEAVY:")][-1]
    assert line == "HEAVY:", f"{argv} imported {line[6:]}"


def test_the_plugin_is_registered_by_its_entry_point():
    from importlib.metadata import entry_points

    (point,) = [e for e in entry_points(group="mosaic.plugins") if e.name == "sweep"]
    assert point.value == "mosaic_sweep.plugin"


def test_dashboard_without_optuna_dashboard_says_how_to_get_it(tmp_path):
    pytest.importorskip("optuna")
    try:
        import optuna_dashboard  # noqa: F401

        pytest.skip("optuna-dashboard is installed here")
    except ImportError:
        pass
    import optuna

    (tmp_path / "var/sweeps").mkdir(parents=True)
    optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path}/var/sweeps/s.db")
    result = sweep(["dashboard", "s"], cwd=tmp_path)
    assert (
        result.returncode == 1 and "optuna-dashboard is not installed (it comes with the sweep extra" in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1
