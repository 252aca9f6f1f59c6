"""The host's layering: no import cycle in ``mosaic_core`` (type-only and function-level imports
counted), and the host imports no plugin: plugins depend on the host, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "mosaic_core"
PLUGIN_PACKAGES = ("cleanrl_worker", "mosaic_fastlane", "mosaic_analytics", "mosaic_curriculum",
                   "mosaic_example_plugin", "mosaic_sweep", "mosaic_dashboard")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = {}
    for path in CORE.rglob("*.py"):
        if path.name.endswith("_pb2.py") or path.name.endswith("_pb2_grpc.py"):
            continue
        parts = path.relative_to(CORE.parent).with_suffix("").parts
        modules[".".join(parts).removesuffix(".__init__")] = _imports(path)
    return modules


def test_no_import_cycle_in_the_host():
    modules = _graph()
    edges = {name: {m for m in imports if m in modules and m != name} for name, imports in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        for dep in sorted(edges[name]):
            assert dep not in path, "import cycle: " + " -> ".join(path[path.index(dep):] + [dep])
            if dep not in done:
                visit(dep, path + [dep])
        done.add(name)

    for name in sorted(edges):
        visit(name, [name])


def test_the_host_imports_no_plugin():
    for name, imports in _graph().items():
        leaked = sorted(m for m in imports if m.split(".")[0] in PLUGIN_PACKAGES)
        assert not leaked, f"{name} imports {leaked}"


def test_types_module_depends_on_nothing_of_ours():
    assert not {m for m in _imports(CORE / "types.py") if m.startswith("mosaic_core")}
