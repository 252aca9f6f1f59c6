"""The layering: no import cycle in ``mosaic_core`` (type-only and function-level imports counted);
the host imports no plugin; a package outside the core imports only the extension API (the names
``mosaic_core.__all__`` lists and the modules ``mosaic_core.PUBLIC_MODULES`` names, each name in
its module's ``__all__``), a built-in plugin the host toolkit too (``mosaic_core.toolkit``), never
another plugin and never a private name (``_x``) of another package; and no package names an
extras key another package owns. The packages are the ones ``pyproject.toml`` (the project's and
each example's) installs or registers under a ``mosaic.*`` entry point."""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import mosaic_core
from mosaic_core import toolkit

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


def _graph(package: str = "mosaic_core", folder: Path = CORE) -> dict[str, set[str]]:
    """Module -> what it imports (every import, function-level and type-only ones too)."""
    modules = {}
    for path in folder.rglob("*.py"):
        if path.name.endswith("_pb2.py") or path.name.endswith("_pb2_grpc.py"):
            continue
        parts = (package, *path.relative_to(folder).with_suffix("").parts)
        modules[".".join(parts).removesuffix(".__init__")] = _imports(path)
    return modules


def _cycle(modules: dict[str, set[str]]) -> list[str] | None:
    """An import cycle among ``modules`` (as a path), or None."""
    edges = {name: {m for m in imports if m in modules and m != name} for name, imports in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        for dep in sorted(edges[name]):
            if dep in path:
                return path[path.index(dep) :] + [dep]
            if dep not in done:
                found = visit(dep, path + [dep])
                if found:
                    return found
        done.add(name)
        return None

    return next((found for name in sorted(edges) if (found := visit(name, [name]))), None)


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


def _source(module: str) -> Path | None:
    """The file of ``mosaic_core.<module>`` (a package's ``__init__.py``), None when there is none."""
    path = CORE.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _all_of(module: str) -> set[str] | None:
    """A core module's ``__all__`` (read from its source: nothing of it is imported here)."""
    path = _source(module)
    assert path is not None, module
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return None


def _public_roots(toolkit_too: bool) -> tuple[str, ...]:
    return (*mosaic_core.PUBLIC_MODULES, *(toolkit.MODULES if toolkit_too else ()))


def _public_module(module: str, toolkit_too: bool = True) -> str | None:
    """The public module ``module`` (a dotted path under mosaic_core) is, or is inside."""
    for public in _public_roots(toolkit_too):
        if module == public or module.startswith(public + "."):
            return public
    return None


def _top_level_problem(name: str, toolkit_too: bool) -> str | None:
    if name in mosaic_core.__all__ or name in mosaic_core.PUBLIC_MODULES:
        return None
    if toolkit_too and (name == "toolkit" or name in toolkit.MODULES or name.partition(".")[0] in toolkit.MODULES):
        return None
    return f"from mosaic_core import {name}"


def _surface_problem(node: ast.AST, toolkit_too: bool = True) -> str | None:
    """Why an import of ``mosaic_core`` reaches past the public surface (None when it does not):
    a module outside it, a name outside its module's ``__all__``, a private name. ``toolkit_too``:
    the host toolkit is allowed (a built-in plugin)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            inner = alias.name.removeprefix("mosaic_core").lstrip(".")
            if alias.name.split(".")[0] != "mosaic_core" or not inner:
                continue
            if _public_module(inner, toolkit_too) is None and not (toolkit_too and inner == "toolkit"):
                return f"import {alias.name}"
        return None
    assert isinstance(node, ast.ImportFrom)
    inner = node.module.removeprefix("mosaic_core").lstrip(".") if node.module else ""
    for alias in node.names:
        where = f"from {node.module} import {alias.name}"
        if alias.name.startswith("_"):
            return f"{where} (a private name)"
        if not inner:  # from mosaic_core import NAME: a top-level name or a public module
            problem = _top_level_problem(alias.name, toolkit_too)
        elif inner == "toolkit":
            problem = None if toolkit_too and alias.name in toolkit.__all__ else where
        elif _public_module(inner, toolkit_too) is None:  # from mosaic_core.trainer import client
            problem = None if _public_module(f"{inner}.{alias.name}", toolkit_too) else where
        else:
            problem = None if alias.name in (_all_of(inner) or ()) else f"{where} (not in {node.module}.__all__)"
        if problem:
            return problem
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
        "mosaic_arena",
    } <= set(PACKAGES)
    for name, folder in PACKAGES.items():
        assert (folder / "__init__.py").is_file(), f"{name}: no package at {folder}"


def test_no_import_cycle_in_the_host():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_in_a_plugin():
    """Function-level imports count: ``cli`` importing ``runs_manage`` which imports ``cli`` back is
    a cycle even when neither import runs at import time."""
    cycles = [
        " -> ".join(cycle)
        for package, folder in sorted(PLUGIN_PACKAGES.items())
        if (cycle := _cycle(_graph(package, folder)))
    ]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


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


def _built_in(path: Path) -> bool:
    """A built-in plugin (under ``plugins/``) may use the host toolkit; an example, as a third party, may not."""
    return (ROOT / "plugins") in path.parents


def test_plugins_import_only_the_public_surface():
    leaks = []
    for _package, path, node, module in _plugin_imports():
        if module.split(".")[0] == "mosaic_core":
            problem = _surface_problem(node, toolkit_too=_built_in(path))
            if problem:
                leaks.append(f"{path.relative_to(ROOT)}:{node.lineno}: {problem}")
    assert not leaks, "past the extension API (mosaic_core.__all__, PUBLIC_MODULES) and the toolkit:\n" + "\n".join(
        sorted(set(leaks))
    )


def test_plugins_read_only_public_attributes_of_the_top_package():
    """``import mosaic_core`` then ``mosaic_core.NAME``: the same surface as an import."""
    leaks = []
    for package, folder in sorted(PLUGIN_PACKAGES.items()):
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "mosaic_core"
                ):
                    problem = _top_level_problem(node.attr, _built_in(path))
                    if problem and node.attr != "toolkit":
                        leaks.append(f"{path.relative_to(ROOT)}:{node.lineno}: mosaic_core.{node.attr} ({package})")
    assert not leaks, "\n".join(leaks)


def test_no_private_name_crosses_a_package():
    """``from mosaic_core.runstore.summary import _read_json`` in a plugin: a private name of ours is
    its package's own (a library's, such as Ray's, is that worker's business)."""
    leaks = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {package} imports {module}.{alias.name}"
        for package, path, node, module in _plugin_imports()
        if isinstance(node, ast.ImportFrom) and module.split(".")[0] != package and module.split(".")[0] in PACKAGES
        for alias in node.names
        if alias.name.startswith("_") or any(part.startswith("_") for part in module.split(".")[1:])
    ]
    assert not leaks, "\n".join(leaks)


def test_every_public_module_lists_its_names():
    """Each module of the extension API and the toolkit (a package's modules too) has an ``__all__``,
    and every name in it exists."""
    for root in _public_roots(toolkit_too=True):
        path = _source(root)
        assert path is not None, root
        modules = [root] + (
            [f"{root}.{p.stem}" for p in path.parent.glob("*.py") if p.stem != "__init__"]
            if path.name == "__init__.py"
            else []
        )
        for module in modules:
            names = _all_of(module)
            assert names is not None, f"mosaic_core.{module} has no __all__"
            imported = importlib.import_module(f"mosaic_core.{module}")
            assert not [n for n in names if not hasattr(imported, n) and _source(f"{module}.{n}") is None], module


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
        "from mosaic_core.runstore.index import _x",
        "from mosaic_core.runstore.summary import _read_json",
        "from mosaic_core.files import json",  # imported there, not in its __all__
        "from mosaic_core import prepare",  # a host internal
        "from mosaic_core.toolkit import prepare",
    ):
        assert problem(private), private
    assert _surface_problem(ast.parse("from mosaic_core.toolkit import plugin_host").body[0], toolkit_too=True) is None
    assert _surface_problem(ast.parse("from mosaic_core.toolkit import plugin_host").body[0], toolkit_too=False)
    assert _surface_problem(ast.parse("from mosaic_core import procs").body[0], toolkit_too=False)


def test_the_public_surface_resolves():
    for name in mosaic_core.__all__:
        assert getattr(mosaic_core, name) is not None, name
    for name in toolkit.__all__:
        assert getattr(toolkit, name) is not None, name
    assert not set(mosaic_core.__all__) & set(toolkit.__all__)  # each name in one place


def test_types_module_depends_on_nothing_of_ours():
    assert not {m for m in _imports(CORE / "types.py") if m.startswith("mosaic_core")}


def _names_extras(node: ast.AST) -> bool:
    """``extras``, ``x.extras``, ``config["extras"]``, ``config.get("extras")``: a run's extras."""
    if isinstance(node, ast.Name):
        return node.id == "extras" or node.id.endswith("_extras")
    if isinstance(node, ast.Attribute):
        return node.attr == "extras" or node.attr.endswith("_extras")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "extras"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "extras"
    return False


def _keys_named(path: Path, core: bool) -> list[tuple[int, str]]:
    """The extras keys a module names: read or written (``extras["k"]``, ``extras.get("k")``,
    ``"k" in extras``, a dict literal merged into extras) and, in the core, listed (``KEYS = ("k",)``)."""
    tree = ast.parse(path.read_text())
    found = []
    if core:
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Tuple, ast.List, ast.Set)):
                found += [(e.lineno, e.value) for e in node.value.elts if isinstance(e, ast.Constant)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _names_extras(node.value) and isinstance(node.slice, ast.Constant):
            found.append((node.lineno, node.slice.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and _names_extras(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, node.args[0].value))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
                map(_names_extras, node.comparators)
            ):
                found.append((node.lineno, node.left.value))
    return [(line, name) for line, name in found if isinstance(name, str)]


def _key_owners() -> dict[str, set[str]]:
    """Extras key -> the packages that declare it: each plugin's ``mosaic_extras_keys`` and each
    installed worker's ``Worker.extras_keys`` (two workers may each have a ``preset`` of their own);
    the contract's standard keys and ``algo_params`` (``config.HYPERPARAMETERS``) are the core's."""
    from mosaic_core.config import HYPERPARAMETERS
    from mosaic_core.contract import STANDARD_KEYS
    from mosaic_core.toolkit import plugin_host
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import discover_workers

    host = plugin_host()
    package_of = {item.name: item.value.split(":")[0].split(".")[0] for item in host.loaded}
    declared = [(package_of.get(plugin, "mosaic_core"), key) for plugin, key in host.extras_keys()]
    for item in discover_workers(host):
        if item.status == "active":
            package = item.obj.worker.split(":")[0].split(".")[0]
            declared += [(package, key) for key in load_worker(item).extras_keys() or []]
    owners: dict[str, set[str]] = {key.name: {"mosaic_core"} for key in STANDARD_KEYS}
    owners[HYPERPARAMETERS] = {"mosaic_core"}
    for package, key in declared:
        if not key.prefix and "mosaic_core" not in owners.get(key.name, ()):
            owners.setdefault(key.name, set()).add(package)
    return owners


def test_no_package_names_a_key_another_package_owns():
    """Each plugin declares its extras keys (``mosaic_extras_keys``), each worker its own
    (``Worker.extras_keys``); no other plugin, worker or the core reads, writes or lists one of
    them by name: what crosses goes through a declaration (``ExtrasKey(bookkeeping=True)``,
    ``switches_envs``, ``live_frames``, ``run_notes``, ``metrics_interval``, ``names_experiment``)
    or a hook."""
    owners = _key_owners()
    assert owners["fastlane"] == {"mosaic_fastlane"} and owners["optuna_seed"] == {"mosaic_sweep"}
    assert owners["experiment_name"] == {"cleanrl_worker"} and owners["notes"] == {"mosaic_analytics"}
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name!r} is {' and '.join(sorted(owners[name]))}'s"
        for package, folder in sorted(PACKAGES.items())
        for path in sorted(folder.rglob("*.py"))
        for line, name in _keys_named(path, core=package == "mosaic_core")
        if not owners.get(name, {package}) & {package, "mosaic_core"}
    ]
    assert not found, "a package's key named outside it:\n" + "\n".join(found)


def test_the_key_check_sees_each_way_of_naming_a_key(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        'KEYS = ("a",)\n'
        "def f(config, run):\n"
        '    config["extras"]["b"] = True\n'
        '    run.extras.get("c")\n'
        '    return "d" in extras\n'
    )
    assert [name for _line, name in _keys_named(source, core=True)] == ["a", "b", "c", "d"]
    assert [name for _line, name in _keys_named(source, core=False)] == ["b", "c", "d"]
