"""The core knows no plugin or worker by name: no string in ``mosaic_core`` (docstrings and
comments aside) names CleanRL, W&B, analytics, FastLane or the curriculum. Plugins declare what
they own (extras keys, settings, private run folders) and the core asks them.

Read with ``ast``: a name in a docstring or a comment is prose, a name in any other string is data."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CORE = Path(__file__).parents[2] / "mosaic_core"
NAMES = re.compile(r"cleanrl|wandb|analytics|fastlane|curriculum", re.IGNORECASE)
# Allowed on purpose: the manifest's names before the rename, read for runs written then.
OLD_NAMES = {("runs.py", "analytics.json"), ("runs.py", "mosaic.analytics/1")}
# The checkpoint suffix the CleanRL worker's ``Worker.checkpoint_layout`` takes over (another
# change on its way removes this line; drop the entry then).
PENDING = {("runstore/artifacts.py", ".cleanrl_model")}


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def named_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string that is not a docstring and names a plugin or worker."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in prose
        and NAMES.search(node.value)
    ]


def test_no_plugin_or_worker_name_is_data_in_the_core():
    found = []
    for path in sorted(CORE.rglob("*.py")):
        where = path.relative_to(CORE).as_posix()
        for line, text in named_strings(path.read_text(encoding="utf-8")):
            if (where, text) not in OLD_NAMES | PENDING:
                found.append(f"mosaic_core/{where}:{line}: {text[:80]!r}")
    assert found == [], "plugin or worker names as data in the core:\n" + "\n".join(found)


def test_the_check_sees_data_and_skips_prose():
    source = '''"""A docstring naming wandb."""
# a comment naming fastlane
def f():
    """The curriculum, in prose."""
    return {"dir": "wandb", "key": f"extras.{'track'}_Analytics"}
'''
    assert [text for _line, text in named_strings(source)] == ["wandb", "_Analytics"]
