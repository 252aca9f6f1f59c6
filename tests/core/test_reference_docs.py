"""The reference pages generated from the code (``docs/reference/cli.md``, ``schemas.md``) are up
to date, cover every command and worker of this distribution, and the generator's ``--check``
names a stale page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mosaic_core import refdocs
from mosaic_core.cli.main import BUILTIN

ROOT = Path(__file__).parents[2]
PAGES = refdocs.pages()


def test_the_committed_reference_pages_are_up_to_date():
    for name, text in PAGES.items():
        committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert committed == text, f"docs/reference/{name} is stale: run python -m mosaic_core.refdocs"


def test_the_cli_page_has_every_command_and_every_worker_of_this_distribution():
    cli = PAGES["cli.md"]
    for command in [
        "run",
        "daemon",
        "submit",
        "cancel",
        "logs",
        "runs",
        "algos",
        "envs",
        "enjoy",
        "plot",
        "tensorboard",
        "serve",
        "sweep",
        "fastlane",
        *(c.name for c in BUILTIN),
    ]:
        assert f"\n## mosaic {command}\n" in cli, command
    for worker in ("cleanrl", "rllib", "xuance"):
        section = cli.split(f"\n### mosaic run --worker {worker}\n", 1)[1].split("\n### ", 1)[0]
        assert "--total-timesteps" in section and "--dry-run" in section and "--ray-address" in section
    assert "\ncleanrl worker:\n" in cli  # a worker's own flags, after the host's
    assert "### mosaic sweep run" in cli and "### mosaic workers install" in cli  # subcommands too
    assert "--worker example" not in cli  # a third party's worker is not ours to document


def test_the_schema_page_follows_the_code():
    from mosaic_core import config, contract, manifest

    schemas = PAGES["schemas.md"]
    assert all(f"| `{field}` |" in schemas for field in config.REQUIRED)
    assert all(f"| `{key.name}` |" in schemas for key in contract.STANDARD_KEYS)
    assert f"`{manifest.MANIFEST_SCHEMA}`" in schemas and f'"schema": "{contract.EVAL_SCHEMA}"' in schemas


def test_check_names_a_stale_page_and_writes_nothing(tmp_path: Path):
    for name, text in PAGES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    check = [sys.executable, "-m", "mosaic_core.refdocs", "--check", "--out", str(tmp_path)]
    assert subprocess.run(check, capture_output=True, text=True, cwd=tmp_path).returncode == 0
    (tmp_path / "cli.md").write_text(PAGES["cli.md"].replace("--total-timesteps", "--total-steps"), encoding="utf-8")
    result = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 1 and "cli.md" in result.stderr and "schemas.md" not in result.stderr
    assert "--total-steps" in (tmp_path / "cli.md").read_text(encoding="utf-8")
