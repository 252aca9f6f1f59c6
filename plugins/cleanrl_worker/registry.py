"""Which file runs for ``--algo NAME``: the CleanRL worker's algorithm registry.

An algorithm is a CleanRL-style single-file script. ``--algo`` is either a path to such a
script or a name looked up in these sources, in this order (the first that has the name
wins; explicit choices beat defaults):

1. ``script``      -- ``--algo path/to/x.py`` (anything with a ``/`` or ending in ``.py``),
                      resolved against the current directory; the file must exist.
2. ``plugin``      -- a plugin's ``mosaic_cleanrl_algorithms`` hook (the hook the worker
                      declares, :mod:`cleanrl_worker.hookspecs`) maps the name to
                      ``pkg.module`` (that module's file, found with find_spec: the module
                      itself is never imported, only its parent package) or
                      ``pkg.module:func`` (a function returning the script's path).
3. ``checkout``    -- an upstream CleanRL git checkout named by ``extras.cleanrl_home`` or,
                      failing that, ``MOSAIC_CLEANRL_HOME``: ``<home>/cleanrl/<name>.py``
                      (or ``<home>/cleanrl/<name>/<name>.py``); ``<home>`` goes on sys.path
                      so ``cleanrl_utils`` imports.
4. ``installed``   -- an importable ``cleanrl`` package: ``cleanrl/<name>.py``; its parent
                      folder goes on sys.path.
5. ``bundled``     -- MOSAIC's own CleanRL-compatible scripts in
                      ``cleanrl_worker/algorithms/<name>.py``: the default on a fresh machine.

Nothing here imports torch, gymnasium, tyro or an algorithm module.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError

RESOLUTION_ORDER = ("script", "plugin", "checkout", "installed", "bundled")
ORDER_TEXT = "script path > plugin (mosaic_cleanrl_algorithms) > checkout (extras.cleanrl_home, then MOSAIC_CLEANRL_HOME) > installed cleanrl package > bundled"
HOOK = "mosaic_cleanrl_algorithms"
HOME_VAR = "MOSAIC_CLEANRL_HOME"
BUNDLED_DIR = Path(__file__).resolve().parent / "algorithms"
CLONE_HINT = (
    "git clone https://github.com/vwxyzjn/cleanrl /path/to/cleanrl and set "
    f"{HOME_VAR}=/path/to/cleanrl or extras.cleanrl_home, or install an importable cleanrl package"
)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Single-file algorithms of upstream CleanRL (github.com/vwxyzjn/cleanrl, folder cleanrl/).
CLEANRL_ALGORITHMS = (
    "c51",
    "c51_atari",
    "c51_atari_jax",
    "c51_jax",
    "ddpg_continuous_action",
    "ddpg_continuous_action_jax",
    "dqn",
    "dqn_atari",
    "dqn_atari_jax",
    "dqn_jax",
    "ppg_procgen",
    "ppo",
    "ppo_atari",
    "ppo_atari_envpool",
    "ppo_atari_envpool_async_jax_scan_impalanet_machado",
    "ppo_atari_envpool_xla_jax",
    "ppo_atari_envpool_xla_jax_scan",
    "ppo_atari_lstm",
    "ppo_atari_multigpu",
    "ppo_continuous_action",
    "ppo_continuous_action_isaacgym",
    "ppo_pettingzoo_ma_atari",
    "ppo_procgen",
    "ppo_rnd_envpool",
    "ppo_trxl",
    "pqn",
    "pqn_atari_envpool",
    "pqn_atari_envpool_lstm",
    "qdagger_dqn_atari_impalacnn",
    "qdagger_dqn_atari_jax_impalacnn",
    "rainbow_atari",
    "rpo_continuous_action",
    "sac_atari",
    "sac_continuous_action",
    "td3_continuous_action",
    "td3_continuous_action_jax",
)


@dataclass(frozen=True)
class ResolvedAlgorithm:
    """The script that runs for ``--algo``; ``checkout_root`` goes first on the child's sys.path."""

    name: str
    script: Path
    source: str  # one of RESOLUTION_ORDER
    checkout_root: Path | None
    detail: str

    def to_dict(self) -> dict[str, str | None]:
        data = asdict(self)
        data["script"] = str(self.script)
        data["checkout_root"] = str(self.checkout_root) if self.checkout_root else None
        return data


@dataclass(frozen=True)
class AlgorithmEntry:
    """One name and every source it is available from; ``winner`` is what ``resolve`` picks."""

    name: str
    sources: tuple[ResolvedAlgorithm, ...]
    upstream: bool  # a name of upstream CleanRL
    error: str | None = None  # e.g. two entry points with this name

    @property
    def winner(self) -> ResolvedAlgorithm | None:
        return None if self.error or not self.sources else self.sources[0]

    @property
    def documented(self) -> bool:
        """One of MOSAIC's documented names (``cleanrl_worker.readiness.DOCUMENTED``)."""
        from cleanrl_worker.readiness import DOCUMENTED

        return self.name in DOCUMENTED

    def status(self):
        """Whether it can run here now (:class:`cleanrl_worker.readiness.Status`)."""
        from cleanrl_worker.readiness import Status, status_of

        if self.error:
            return Status("cannot_run", self.error)
        return status_of(self.name, tuple(s.source for s in self.sources))

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "upstream_cleanrl": self.upstream,
            "documented": self.documented,
            "winner": self.winner.source if self.winner else None,
            "sources": [s.to_dict() for s in self.sources],
            "status": self.status().to_dict(),
            "error": self.error,
        }


@dataclass(frozen=True)
class _Contribution:
    """One algorithm a package adds: ``value`` is ``pkg.module`` or ``pkg.module:func``."""

    name: str
    value: str
    origin: str  # the plugin (or deprecated entry point) and its distribution, for messages


_noticed: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _noticed:
        _noticed.add(message)
        print(f"mosaic: {message}", file=sys.stderr)


@dataclass
class _Contributions:
    """Algorithms plugins add (``mosaic_cleanrl_algorithms``), by name (several when names clash)."""

    by_name: dict[str, list[_Contribution]] = field(default_factory=dict)

    @classmethod
    def scan(cls) -> _Contributions:
        from mosaic_core.toolkit import plugin_host

        found = cls()
        for plugin, value, error in plugin_host().provided(HOOK):
            origin = f"{HOOK} of {plugin.describe()}"
            if error is not None:
                continue  # the host has said so (a failed hook is named once)
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                _warn_once(f"warning: {origin} returned {value!r:.80}; expected a dict of names to 'pkg.module[:func]'")
                continue
            for name, where in sorted(value.items()):
                found.add(_Contribution(name, where, origin))
        return found

    def add(self, contribution: _Contribution) -> None:
        same = self.by_name.setdefault(contribution.name, [])
        if all((c.value, c.origin) != (contribution.value, contribution.origin) for c in same):
            same.append(contribution)  # the same distribution seen twice on sys.path counts once


# ------------------------------------------------------------------------------------ sources
def _shown(text: object) -> str:
    """A path or value as it can be printed on one line."""
    text = str(text)
    return text if text.isprintable() else repr(text)


def _from_script(algo: str, cwd: Path) -> ResolvedAlgorithm:
    try:
        path = (cwd / Path(algo).expanduser()).resolve()
        exists, is_file = path.exists(), path.is_file()
        root = next((p for p in list(path.parents)[:3] if (p / "cleanrl_utils").is_dir()), None)
    except (OSError, ValueError, RuntimeError) as exc:
        raise UsageError(f"--algo {_shown(algo)}: not a usable script path ({exc})") from exc
    if not exists:
        hint = ""
        stem = Path(algo).stem
        if "/" not in algo and stem in set(CLEANRL_ALGORITHMS) | set(bundled_names()) | set(
            _Contributions.scan().by_name
        ):
            hint = f"; to run the registered algorithm, use --algo {stem}"
        raise UsageError(f"--algo {_shown(algo)}: script {_shown(path)} does not exist{hint}")
    if not is_file or path.suffix != ".py":
        raise UsageError(f"--algo {_shown(algo)}: {_shown(path)} is not a Python script (a .py file)")
    detail = f"script path {algo}" + (f"; CleanRL checkout root {root} goes on sys.path" if root else "")
    return ResolvedAlgorithm(path.stem, path, "script", root, detail)


def _from_plugin(name: str, found: list[_Contribution]) -> ResolvedAlgorithm:
    if len(found) > 1:
        both = " and ".join(c.origin for c in found)
        raise UsageError(f"algorithm {name!r} is declared twice: {both}; uninstall one of them")
    contribution = found[0]
    module, _colon, attr = (part.strip() for part in contribution.value.partition(":"))
    try:
        if attr:  # pkg.module:func -> a function returning the script's path
            target: Any = importlib.import_module(module)
            for part in attr.split("."):
                target = getattr(target, part)
            script = Path(os.fspath(target())).expanduser().resolve()
        else:  # pkg.module -> that module's file, found without importing it
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
                raise ModuleNotFoundError(f"module {module!r} not found")
            script = Path(spec.origin).resolve()
    except Exception as exc:  # a broken third-party algorithm must not take the host down
        raise UsageError(
            f"broken {name!r} = {contribution.value!r} ({contribution.origin}): {type(exc).__name__}: {exc}"
        ) from exc
    if not script.is_file() or script.suffix != ".py":
        raise UsageError(
            f"broken {name!r} = {contribution.value!r} ({contribution.origin}): {script} is not an existing .py script"
        )
    return ResolvedAlgorithm(name, script, "plugin", None, f"{name!r} = {contribution.value!r} ({contribution.origin})")


def checkout_home(
    cleanrl_home: str | os.PathLike | None, cwd: Path, origin: str = "extras.cleanrl_home"
) -> tuple[Path, str] | None:
    """The CleanRL checkout to use and where it was named, or None; bad paths are an error."""
    if cleanrl_home not in (None, ""):
        if not isinstance(cleanrl_home, (str, os.PathLike)):
            raise UsageError(f"{origin} must be the path of a CleanRL checkout, got {cleanrl_home!r}")
        raw = os.fspath(cleanrl_home)
        origin = HOME_VAR if raw == os.environ.get(HOME_VAR) else origin
    elif os.environ.get(HOME_VAR):
        raw, origin = os.environ[HOME_VAR], HOME_VAR
    else:
        return None
    home = (cwd / Path(raw).expanduser()).resolve()
    if not home.is_dir():
        raise UsageError(f"{origin}={raw}: {home} is not a directory; point it at a CleanRL checkout: {CLONE_HINT}")
    if not (home / "cleanrl").is_dir():
        hint = (
            f"; did you mean its parent {home.parent}?"
            if home.name == "cleanrl" and (home.parent / "cleanrl").is_dir()
            else " (the folder holding cleanrl/ and cleanrl_utils/)"
        )
        raise UsageError(f"{origin}={raw}: {home} is not a CleanRL checkout: it has no cleanrl/ folder{hint}")
    return home, origin


def _script_in(package_dir: Path, name: str) -> Path | None:
    for candidate in (package_dir / f"{name}.py", package_dir / name / f"{name}.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _from_checkout(name: str, home: tuple[Path, str]) -> ResolvedAlgorithm | None:
    root, origin = home
    script = _script_in(root / "cleanrl", name)
    return ResolvedAlgorithm(name, script, "checkout", root, f"CleanRL checkout {root} ({origin})") if script else None


def installed_package_dirs() -> list[Path]:
    """Folders of an importable ``cleanrl`` package (found without importing it)."""
    try:
        spec = importlib.util.find_spec("cleanrl")
    except (ImportError, ValueError):
        return []
    return [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []


def _from_installed(name: str, package_dirs: list[Path]) -> ResolvedAlgorithm | None:
    for package_dir in package_dirs:
        script = _script_in(package_dir, name)
        if script:
            return ResolvedAlgorithm(
                name, script, "installed", package_dir.parent, f"installed cleanrl package at {package_dir}"
            )
    return None


def bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.py") if not p.name.startswith("_"))


def _from_bundled(name: str) -> ResolvedAlgorithm | None:
    script = BUNDLED_DIR / f"{name}.py"
    return (
        ResolvedAlgorithm(name, script, "bundled", None, "bundled with MOSAIC (cleanrl_worker.algorithms)")
        if script.is_file()
        else None
    )


# ------------------------------------------------------------------------------------ public API
def is_script_path(algo: str) -> bool:
    return "/" in algo or os.sep in algo or algo.endswith(".py")


def resolve(
    algo: str, *, cleanrl_home: str | os.PathLike | None = None, cwd: str | os.PathLike | None = None
) -> ResolvedAlgorithm:
    """Resolve ``--algo`` (a name or a script path) to the script that runs; see the module doc.

    ``cleanrl_home`` is ``extras.cleanrl_home`` (it beats ``MOSAIC_CLEANRL_HOME``); ``cwd``
    anchors relative paths. Raises :class:`UsageError` with a one-line, actionable message.
    """
    cwd = Path(cwd or Path.cwd())
    if not isinstance(algo, str) or not algo.strip():
        raise UsageError(f"--algo must be an algorithm name or a path to a .py script, got {algo!r}")
    if is_script_path(algo):
        return _from_script(algo, cwd)
    if not NAME.match(algo):
        raise UsageError(
            f"--algo {_shown(algo)} is neither an algorithm name (letters, digits, _) nor a path to a .py script"
        )
    added = _Contributions.scan().by_name.get(algo)
    if added:
        return _from_plugin(algo, added)
    home = checkout_home(cleanrl_home, cwd)
    skipped = ""
    if home:
        found = _from_checkout(algo, home)
        if found:
            return found
        skipped = f"; not in CleanRL checkout {home[0]}"
    found = _from_installed(algo, installed_package_dirs()) or _from_bundled(algo)
    if found:
        return ResolvedAlgorithm(found.name, found.script, found.source, found.checkout_root, found.detail + skipped)
    raise UsageError(_unknown_message(algo, home))


def _unknown_message(algo: str, home: tuple[Path, str] | None) -> str:
    bundled = ", ".join(bundled_names()) or "none"
    if algo in CLEANRL_ALGORITHMS:
        where = f"CleanRL checkout {home[0]} has no cleanrl/{algo}.py" if home else "no CleanRL checkout is configured"
        return (
            f"algorithm {algo!r} is an upstream CleanRL script that MOSAIC does not bundle and {where}: "
            f"{CLONE_HINT}; bundled algorithms: {bundled}"
        )
    known = known_names(home)
    close = difflib.get_close_matches(algo, known, n=1)
    suggestion = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"unknown algorithm {algo!r}{suggestion}; known algorithms: {', '.join(known)} "
        "(or pass a path to a .py script); `mosaic algos` shows where each one comes from"
    )


def known_names(home: tuple[Path, str] | None) -> list[str]:
    """Every name :func:`resolve` finds or explains: upstream CleanRL's (those not here too),
    plugins', the checkout's, an installed cleanrl package's and the bundled ones."""
    installed = {p.stem for d in installed_package_dirs() for p in d.glob("*.py") if not p.name.startswith("_")}
    return sorted(
        set(CLEANRL_ALGORITHMS)
        | set(bundled_names())
        | set(_Contributions.scan().by_name)
        | set(_checkout_names(home))
        | installed
    )


def _checkout_names(home: tuple[Path, str] | None) -> list[str]:
    if not home:
        return []
    package = home[0] / "cleanrl"
    names = {p.stem for p in package.glob("*.py") if not p.name.startswith("_")}
    names |= {p.parent.name for p in package.glob("*/*.py") if p.stem == p.parent.name}
    return sorted(names)


def list_algorithms(
    cleanrl_home: str | os.PathLike | None = None,
    *,
    cwd: str | os.PathLike | None = None,
    origin: str = "extras.cleanrl_home",
) -> list[AlgorithmEntry]:
    """Every known name with every source it is available from, in resolution order.

    Includes upstream CleanRL names that are not available here (no sources), so a user
    sees what a checkout would add. A bad ``cleanrl_home`` raises :class:`UsageError`.
    """
    cwd = Path(cwd or Path.cwd())
    home = checkout_home(cleanrl_home, cwd, origin)
    added = _Contributions.scan().by_name
    package_dirs = installed_package_dirs()
    installed = sorted({p.stem for d in package_dirs for p in d.glob("*.py") if not p.name.startswith("_")})
    names = sorted(
        set(CLEANRL_ALGORITHMS) | set(added) | set(_checkout_names(home)) | set(installed) | set(bundled_names())
    )
    entries = []
    for name in names:
        sources: list[ResolvedAlgorithm] = []
        error = None
        if name in added:
            try:
                sources.append(_from_plugin(name, added[name]))
            except UsageError as exc:
                error = str(exc)
        for found in (
            _from_checkout(name, home) if home else None,
            _from_installed(name, package_dirs),
            _from_bundled(name),
        ):
            if found:
                sources.append(found)
        entries.append(AlgorithmEntry(name, tuple(sources), name in CLEANRL_ALGORITHMS, error))
    return entries


def entrypoint_of(found: ResolvedAlgorithm) -> tuple[str, str]:
    """MOSAIC's ``(module, callable)`` naming of a resolved algorithm: ``cleanrl.<name>`` for a
    checkout or installed CleanRL, ``cleanrl_worker.algorithms.<name>`` for a bundled copy;
    the callable is ``<module>.main`` when the script defines ``main()``, else
    ``<module>:__main__`` (CleanRL scripts run as ``__main__``)."""
    module = {
        "bundled": f"cleanrl_worker.algorithms.{found.name}",
        "installed": f"cleanrl.{found.name}",
        "checkout": f"cleanrl.{found.name}",
        "mode": f"cleanrl_worker.{found.name}",
    }.get(found.source, found.script.stem)
    return module, f"{module}.main" if defines_main(found.script) else f"{module}:__main__"


def defines_main(script: Path) -> bool:
    import ast

    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)
