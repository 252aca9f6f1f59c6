"""Generate ``docs/hooks.md``, the hook reference, from :mod:`mosaic_core.hookspecs`: each
hook's signature, where it runs, its failure policy and its docstring (ending with its
``**Example:**``). Run ``python -m mosaic_core.hookdocs > docs/hooks.md``; a test checks the
committed page is up to date."""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from typing import Any

from mosaic_core import hookspecs

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`")


def _markdown(doc: str) -> str:
    """A hook docstring (reST) as Markdown: roles and double backticks become code, the
    example's ``.. code-block:: python`` a fenced block."""
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(".. code-block::"):
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i])
                i += 1
            out += ["```python", textwrap.dedent("\n".join(block)).strip("\n"), "```"]
            continue
        out.append(_ROLE.sub(r"`\1`", line).replace("``", "`"))
        i += 1
    return "\n".join(out).strip()


def _module_of(name: str) -> Any:
    return importlib.import_module(getattr(hookspecs, name).__module__)


def _where(name: str) -> str:
    """The section of the spec module a hook is in (``Host: before a run``, ``Training process``)."""
    source = inspect.getsource(_module_of(name))
    sections: list[str] = re.findall(r"^# ([A-Z][^\n]*)$", source[: source.index(f"def {name}(")], re.MULTILINE)
    return sections[-1]


def _order(name: str) -> tuple[int, int]:
    """Where a hook's spec is: its module among :data:`~mosaic_core.hookspecs.THEMES`, then its line."""
    theme = _module_of(name).__name__.rpartition(".")[2]
    return hookspecs.THEMES.index(theme), inspect.getsourcelines(getattr(hookspecs, name))[1]


def render() -> str:
    """The reference page, hooks in the order of the spec modules (by lifecycle stage)."""
    hooks = sorted(hookspecs.HOOK_NAMES, key=_order)
    parts = [
        "# Hook reference",
        "",
        "Generated from `mosaic_core/hookspecs/` by `python -m mosaic_core.hookdocs > docs/hooks.md`; "
        "do not edit by hand.",
        "",
        "Implement a hook with `from mosaic_core import hookimpl` in a module your distribution names in "
        "its `mosaic.plugins` entry points. An implementation may take any subset of the arguments. "
        "Failure policy: `stop` ends the run before it starts (exit 2, naming plugin and hook); `isolate` "
        "drops only the failing plugin's part, names it once and records it in `manifest.json`.",
        "",
        "| hook | runs in | failure |",
        "|---|---|---|",
    ]
    parts += [f"| [`{n}`](#{n}) | {_where(n)} | {hookspecs.POLICY[n]} |" for n in hooks]
    for name in hooks:
        function = getattr(hookspecs, name)
        signature = str(inspect.signature(function)).replace("'", "")
        parts += [
            "",
            f"## {name}",
            "",
            "```python",
            f"def {name}{signature}",
            "```",
            "",
            f"*Runs in:* {_where(name)}. *Failure policy:* `{hookspecs.POLICY[name]}`.",
            "",
            _markdown(inspect.getdoc(function) or ""),
        ]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
