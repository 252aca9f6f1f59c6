"""The layering: no import cycle in ``mosaic_core`` (type-only and function-level imports counted);
the host imports no plugin; and a plugin or worker imports only the host's public surface (the
names ``mosaic_core.__all__`` lists and the modules ``mosaic_core.PUBLIC_MODULES`` names), never
another plugin. The packages are the ones ``pyproject.toml`` (the project's and each example's)
installs or registers under a ``mosaic.*`` entry point."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import mosaic_core

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "mosaic_core"


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


def _packages_of(pyproject: Path) -> dict[str, Path]:
    """Top-level package -> its folder: what setuptools installs (``packages``, mapped by
    ``package-dir``, or found under ``packages.find``'s roots) and what each ``mosaic.*`` entry
    point names."""
    data = tomllib.loads(pyproject.read_text())
    setuptools = data.get("tool", {}).get("setuptools", {})
    packages = setuptools.get("packages", [])  # a list, or {"find": {"where": [...]}}
    mapped = {name: pyproject.parent / folder for name, folder in setuptools.get("package-dir", {}).items()}
    found = packages.get("find", {}) if isinstance(packages, dict) else {}
    roots = [pyproject.parent / where for where in found.get("where", ["."])]
    names = {package.split(".")[0] for package in packages if isinstance(packages, list)}
    for group, entries in data.get("project", {}).get("entry-points", {}).items():
        if group.startswith("mosaic."):
            names |= {value.split(":")[0].split(".")[0] for value in entries.values()}
    for root in roots:  # packages.find: every importable folder named mosaic_* under a root
        names |= {init.parent.name for init in root.glob("mosaic_*/__init__.py")}
    folders = {}
    for name in names:
        default = next((root / name for root in roots if (root / name).is_dir()), pyproject.parent / name)
        folders[name] = mapped.get(name, default)
    return folders


def test_every_package_folder_is_installed():
    """Each folder with an ``__init__.py`` under ``plugins/`` and ``mosaic_core/`` is a package
    ``pyproject.toml`` lists (a new subpackage left out would be missing from a wheel)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder_of = {name: ROOT / folder for name, folder in data["package-dir"].items()} | {"mosaic_core": CORE}
    listed = set()
    for package in data["packages"]:
        top, *rest = package.split(".")
        listed.add(folder_of[top].joinpath(*rest))
    on_disk = {init.parent for root in (CORE, ROOT / "plugins") for init in root.rglob("__init__.py")}
    assert on_disk - listed == set()
    assert listed <= on_disk


def _packages() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("examples/*/pyproject.toml"))]:
        found.update(_packages_of(pyproject))
    return found


PACKAGES = _packages()
PLUGIN_PACKAGES = {name: folder for name, folder in PACKAGES.items() if name != "mosaic_core"}


def _public_names(module: str) -> set[str]:
    """A public module's names: its ``__all__``, else what has no leading underscore (read from
    its source: nothing of it is imported here)."""
    path = CORE.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if path.name == "__init__.py":  # a public package's submodules are public
        names |= {p.stem for p in path.parent.glob("*.py")}
    return {name for name in names if not name.startswith("_")}


def _public_module(module: str) -> str | None:
    """The public module ``module`` (a dotted path under mosaic_core) is, or is inside."""
    for public in mosaic_core.PUBLIC_MODULES:
        if module == public or module.startswith(public + "."):
            return public
    return None


def _surface_problem(node: ast.AST) -> str | None:
    """Why an import of ``mosaic_core`` reaches past the public surface (None when it does not)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            inner = alias.name.removeprefix("mosaic_core").lstrip(".")
            if alias.name.split(".")[0] == "mosaic_core" and inner and _public_module(inner) is None:
                return f"import {alias.name}"
        return None
    assert isinstance(node, ast.ImportFrom)
    inner = node.module.removeprefix("mosaic_core").lstrip(".") if node.module else ""
    for alias in node.names:
        if not inner:  # from mosaic_core import NAME: a top-level name or a public module
            if alias.name not in mosaic_core.__all__ and alias.name not in mosaic_core.PUBLIC_MODULES:
                return f"from mosaic_core import {alias.name}"
            continue
        public = _public_module(inner) or _public_module(f"{inner}.{alias.name}")
        if public is None:
            return f"from {node.module} import {alias.name}"
        if public == inner and alias.name not in _public_names(inner):
            return f"from {node.module} import {alias.name} (private to {node.module})"
    return None


def _plugin_imports() -> list[tuple[str, Path, ast.AST, str]]:
    found = []
    for package, folder in sorted(PLUGIN_PACKAGES.items()):
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.append((package, path, node, node.module))
                elif isinstance(node, ast.Import):
                    found += [(package, path, node, alias.name) for alias in node.names]
    return found


def test_the_package_list_comes_from_pyproject():
    # what setuptools installs and every mosaic.* entry point, examples included
    assert {
        "mosaic_core",
        "cleanrl_worker",
        "mosaic_fastlane",
        "mosaic_dashboard",
        "mosaic_curriculum",
        "mosaic_ray",
        "ray_worker",
        "xuance_worker",
        "mosaic_example_plugin",
    } <= set(PACKAGES)
    for name, folder in PACKAGES.items():
        assert (folder / "__init__.py").is_file(), f"{name}: no package at {folder}"


def test_no_import_cycle_in_the_host():
    modules = _graph()
    edges = {name: {m for m in imports if m in modules and m != name} for name, imports in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        for dep in sorted(edges[name]):
            assert dep not in path, "import cycle: " + " -> ".join(path[path.index(dep) :] + [dep])
            if dep not in done:
                visit(dep, path + [dep])
        done.add(name)

    for name in sorted(edges):
        visit(name, [name])


def test_the_host_imports_no_plugin():
    for name, imports in _graph().items():
        leaked = sorted(m for m in imports if m.split(".")[0] in PLUGIN_PACKAGES)
        assert not leaked, f"{name} imports {leaked}"


def test_no_plugin_imports_another_plugin():
    leaks = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {package} imports {module}"
        for package, path, node, module in _plugin_imports()
        if module.split(".")[0] in PLUGIN_PACKAGES and module.split(".")[0] != package
    ]
    assert not leaks, "plugins depend on the host, never on each other:\n" + "\n".join(leaks)


def test_plugins_import_only_the_public_surface():
    leaks = []
    for _package, path, node, module in _plugin_imports():
        if module.split(".")[0] == "mosaic_core":
            problem = _surface_problem(node)
            if problem:
                leaks.append(f"{path.relative_to(ROOT)}:{node.lineno}: {problem}")
    assert not leaks, "a core internal (not in mosaic_core.__all__ or mosaic_core.PUBLIC_MODULES):\n" + "\n".join(
        sorted(set(leaks))
    )


def test_the_surface_check_tells_public_from_private():
    def problem(line: str) -> str | None:
        return _surface_problem(ast.parse(line).body[0])

    for public in (
        "from mosaic_core import hookimpl, Worker",
        "from mosaic_core import child",
        "from mosaic_core.child import emit_event, env_switch",
        "from mosaic_core.trainer import client",
        "from mosaic_core.runstore.trust import untrusted_run",
        "import mosaic_core.procs",
        "from mosaic_core.contract import StopOnSignal",
    ):
        assert problem(public) is None, public
    for private in (
        "from mosaic_core.child import install",
        "from mosaic_core.child import _state",
        "from mosaic_core.pipeline import run_worker",
        "from mosaic_core import pipeline",
        "from mosaic_core.hookspecs import hookimpl",
        "from mosaic_core import _patchpoints",
        "import mosaic_core.supervisor",
        "from mosaic_core.trainer import store",
    ):
        assert problem(private), private


def test_the_public_surface_resolves():
    for name in mosaic_core.__all__:
        assert getattr(mosaic_core, name) is not None, name
    for module in mosaic_core.PUBLIC_MODULES:
        assert _public_names(module), module


def test_types_module_depends_on_nothing_of_ours():
    assert not {m for m in _imports(CORE / "types.py") if m.startswith("mosaic_core")}
