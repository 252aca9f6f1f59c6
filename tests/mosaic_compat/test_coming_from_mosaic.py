"""``docs/coming-from-mosaic.md``: one row per item of the original MOSAIC's documents, each with
one of three statuses, and every ``works as written`` name checked against the product.

The page's tables have four columns: item | the original | here | status. A status is
``works as written``, ``differs: <how, why, what instead>`` or ``out of scope: <why, what
replaces it>``; a row never says *missing*. An item cell that starts with a code span names what
a user types: a ``--flag`` is a flag of ``python -m cleanrl_worker.cli`` (it must be in that
command's ``--help``), a dotted name starting with one of our packages must import (a module, or an
attribute or dataclass field reached from one). Both are checked in real subprocesses.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "coming-from-mosaic.md"
HEADER = ["item", "the original", "here", "status"]
WORKS = "works as written"
REASONED = ("differs: ", "out of scope: ")
MIN_ROWS = 200
MIN_REASON_WORDS = 6  # "differs: …" says how, why and what the user gets: a few words at least
UNFINISHED = re.compile(r"\b(missing|todo|tbd|not yet)\b", re.IGNORECASE)
OUR_PACKAGES = {
    "cleanrl_worker",
    "xuance_worker",
    "ray_worker",
    "mosaic_core",
    "mosaic_fastlane",
    "mosaic_analytics",
    "mosaic_curriculum",
}
LEADING_CODE = re.compile(r"^`([^`]+)`")
FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
HELP_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class Row:
    section: str
    line: int
    item: str
    original: str
    here: str
    status: str

    @property
    def where(self) -> str:
        return f"{PAGE.name}:{self.line} ({self.section}: {self.item})"

    @property
    def name(self) -> str | None:
        """The code span the item starts with, if any."""
        match = LEADING_CODE.match(self.item)
        return match.group(1) if match else None


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse(text: str) -> tuple[list[Row], list[str]]:
    """The table rows of the page, and every problem with the tables' shape."""
    rows: list[Row] = []
    problems: list[str] = []
    section, header_seen = "(top)", False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            section, header_seen = line[3:].strip(), False
        if not line.startswith("|"):
            continue
        row = cells(line)
        if set("".join(row)) <= set("-: "):
            continue  # the separator line under a header
        if not header_seen:
            header_seen = True
            if row != HEADER:
                problems.append(f"{PAGE.name}:{number}: a table's header must be {' | '.join(HEADER)}, got {row}")
            continue
        if len(row) != len(HEADER) or not all(row):
            problems.append(f"{PAGE.name}:{number}: a row needs {len(HEADER)} non-empty cells, got {row}")
            continue
        rows.append(Row(section, number, *row))
    return rows, problems


def status_problems(rows: list[Row]) -> list[str]:
    problems = []
    for row in rows:
        if UNFINISHED.search(row.status):
            problems.append(f"{row.where}: a status never says missing (or todo): {row.status!r}")
        elif row.status == WORKS:
            continue
        elif not row.status.startswith(REASONED):
            problems.append(f"{row.where}: status must be {WORKS!r}, 'differs: …' or 'out of scope: …': {row.status!r}")
        elif len(row.status.split(":", 1)[1].split()) < MIN_REASON_WORDS:
            problems.append(f"{row.where}: say how, why and what instead: {row.status!r}")
    return problems


def duplicate_items(rows: list[Row]) -> list[str]:
    seen: dict[tuple[str, str], Row] = {}
    problems = []
    for row in rows:
        key = (row.section, row.item)
        if key in seen:
            problems.append(f"{row.where}: the same item as line {seen[key].line}")
        seen[key] = row
    return problems


def checked_names(rows: list[Row]) -> tuple[dict[str, Row], dict[str, Row]]:
    """The ``works as written`` rows' flags and importable names, each with its row."""
    flags, names = {}, {}
    for row in rows:
        name = row.name
        if row.status != WORKS or name is None:
            continue
        if FLAG.match(name):
            flags[name] = row
        elif DOTTED.match(name) and name.split(".")[0] in OUR_PACKAGES:
            names[name] = row
    return flags, names


# Resolves each dotted name in a fresh interpreter: the longest importable module prefix, then
# attributes; a dataclass field counts as an attribute. Prints the names that do not resolve.
RESOLVE = """
import dataclasses, importlib, json, sys
def resolves(name):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif attr in fields:
                obj = None
            else:
                return False
        return True
    return False
print(json.dumps([n for n in json.loads(sys.argv[1]) if not resolves(n)]))
"""


def unresolved(names: list[str]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", RESOLVE, json.dumps(names)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def cli_flags() -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_worker.cli", "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return set(HELP_FLAG.findall(proc.stdout))


@pytest.fixture(scope="module")
def page_rows() -> list[Row]:
    rows, problems = parse(PAGE.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)
    return rows


def test_every_item_has_a_row_with_one_of_three_statuses(page_rows):
    assert len(page_rows) >= MIN_ROWS, f"{len(page_rows)} rows; the seeds describe at least {MIN_ROWS} items"
    problems = status_problems(page_rows) + duplicate_items(page_rows)
    assert not problems, "\n".join(problems)


def test_flags_that_work_as_written_are_flags_of_the_cli(page_rows):
    flags, _ = checked_names(page_rows)
    assert "--config" in flags and "--grpc-target" in flags  # the check reaches the CLI's rows
    offered = cli_flags()
    absent = [
        f"{row.where}: {flag} is not in python -m cleanrl_worker.cli --help"
        for flag, row in flags.items()
        if flag not in offered
    ]
    assert not absent, "\n".join(absent)


def test_python_names_that_work_as_written_import(page_rows):
    _, names = checked_names(page_rows)
    assert "cleanrl_worker.config.WorkerConfig" in names and "cleanrl_worker.runtime.DEFAULT_ALGO_REGISTRY" in names
    broken = [f"{names[name].where}: {name} does not import" for name in unresolved(sorted(names))]
    assert not broken, "\n".join(broken)


def test_the_page_is_linked_from_the_manual():
    assert "coming-from-mosaic.md" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^\s+- .*: coming-from-mosaic\.md$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert "(docs/coming-from-mosaic.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


BAD_PAGE = """## CLI

| item | the original | here | status |
|---|---|---|---|
| `--grpc` | handshake | the same | missing |
| `--seed` | seed | the same | works |
| `--algo` | algo | another | differs: yes |
| `--env-id` | env | the same | works as written |
| `--env-id` | env | the same | works as written |
| `--no-such-flag` | a flag | the same | works as written |
| `cleanrl_worker.config.NoSuchName` | a name | the same | works as written |
| `cleanrl_worker.config.WorkerConfig.raw` | a field | the same | differs: a differs row's name is never checked at all |
| only three | cells | here |
"""


def test_the_checks_catch_a_bad_page():
    rows, shape = parse(BAD_PAGE)
    assert len(shape) == 1 and "4 non-empty cells" in shape[0]
    statuses = status_problems(rows)
    assert len(statuses) == 3, statuses
    assert "never says missing" in statuses[0] and "status must be" in statuses[1] and "how, why" in statuses[2]
    assert len(duplicate_items(rows)) == 1
    flags, names = checked_names(rows)
    assert set(flags) == {"--env-id", "--no-such-flag"} and set(names) == {"cleanrl_worker.config.NoSuchName"}
    offered = cli_flags()
    assert "--no-such-flag" not in offered and "--env-id" in offered
    assert unresolved(["cleanrl_worker.config.NoSuchName", "cleanrl_worker.config.WorkerConfig.seed"]) == [
        "cleanrl_worker.config.NoSuchName"
    ]
