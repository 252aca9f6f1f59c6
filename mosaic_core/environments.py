"""Worker environments (MOSAIC's "dependency bundles"): a worker's own venv, built from package
registries by ``mosaic workers install NAME``, where its runs' training processes execute while
the host stays in its own venv.

Layout, under :func:`venvs_root` (``$MOSAIC_VENVS``, else ``$XDG_DATA_HOME/mosaic/venvs``, else
``~/.local/share/mosaic/venvs``; private to the user, 0700)::

    <name>-<key>/                 the venv; <key> hashes everything that went into it
    <name>-<key>/mosaic-environment.json   written last: the build completed (and what it holds)
    <name>-<key>/mosaic-answers/  what its libraries said of a config, kept (ask_environment)
    <name>.json                   which build the worker uses now, and the --extras it was built with
    <name>.lock                   held while a build runs

A build installs the worker's ``requirements`` (plus the ``optional`` groups asked for), the host's
own distribution (so the training process imports ``mosaic_core`` and the plugins) and the worker's
distribution, in one pip resolution, then checks every ``==`` pin. A failed build is removed whole.
Before a run, :func:`preflight` checks the interpreter and the pins (one short subprocess) and gives
the pipeline the interpreter (``run.python``); a missing or stale environment is one line naming
the install command.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.errors import UsageError
from mosaic_core.files import UntrustedPath, check_ancestors, read_private_text, write_json_atomic
from mosaic_core.procs import NEUTRAL_CWD, python_command

VENVS_VAR = "MOSAIC_VENVS"
MARKER = "mosaic-environment.json"
ANSWERS = "mosaic-answers"  # in an environment: what its libraries said of a config (ask_environment)
HOST_DISTRIBUTION = "mosaic-rl"  # the host's own distribution (pyproject.toml)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*$")
# pip's own words for the requirement it could not satisfy or build
_PIP_FAILURES = (
    re.compile(r"No matching distribution found for ([^\s]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s]+)"),
    re.compile(r"Cannot install ([^\s]+)"),
)
_WORKING_ON = re.compile(r"^(?:Collecting|Processing|Obtaining) (.+?)(?: \(from .*\))?$")


def venvs_root() -> Path:
    """Where worker environments live (see the module docstring)."""
    if os.environ.get(VENVS_VAR):
        return Path(os.environ[VENVS_VAR]).absolute()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).absolute() / "mosaic" / "venvs"


def _private_root(create: bool) -> Path:
    """The venvs root, refused when another user owns it or others may write it, or when it lies
    in a folder another user could rename it out of (checked as a runs root's folders are): we
    execute code from there, so a directory another local user controls would run their code as us."""
    root = venvs_root()
    try:
        if create and not os.path.lexists(root):
            _check_folders(root)  # where it will be made
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(root)
    except FileNotFoundError:
        _check_folders(root)
        return root
    except OSError as exc:
        raise UsageError(
            f"worker environments directory {root} cannot be made: {exc.strerror or exc} (set ${VENVS_VAR})"
        ) from None
    if not os.path.isdir(root) or os.path.islink(root):
        raise UsageError(f"worker environments directory {root} is not a directory (set ${VENVS_VAR})")
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise UsageError(
            f"worker environments directory {root} is owned by uid {info.st_uid} or writable by "
            f"others; refusing to run code from it (set ${VENVS_VAR} to a private directory)"
        )
    _check_folders(root)
    return root


def _check_folders(root: Path) -> None:
    try:
        check_ancestors(root, "worker environments directory")
    except UntrustedPath as exc:
        raise UsageError(f"{exc} (set ${VENVS_VAR} to a private directory)") from None


@dataclass(frozen=True)
class EnvironmentStatus:
    """Where a worker's runs execute. ``state``: ``host`` (no environment of its own), ``ready``,
    ``missing``, ``stale`` (built for other requirements) or ``broken``."""

    worker: str
    state: str
    python: str
    path: Path | None = None
    extras: tuple[str, ...] = ()
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.state in ("host", "ready")

    def describe(self) -> str:
        return {"host": "host venv", "ready": f"ready ({self.path})"}.get(self.state, f"{self.state}: {self.detail}")


def install_command(worker: str, extras: tuple[str, ...] = ()) -> str:
    return f"mosaic workers install {worker}" + (f" --extras {','.join(extras)}" if extras else "")


def _distribution_requirement(name: str, extras: set[str]) -> list[str]:
    """pip arguments that install distribution ``name`` as it is installed here: editable from
    its source directory, from that directory, or the same version from the registry."""
    from importlib import metadata  # here: `mosaic workers` lists environments without it (email, zipfile, csv…)

    suffix = f"[{','.join(sorted(extras))}]" if extras else ""
    found = list(metadata.distributions(name=name))
    if not found:
        raise UsageError(f"distribution {name!r} is not installed")
    # pip's own record of where it came from (a source tree's bare egg-info on sys.path has none)
    dist = next((d for d in found if d.read_text("direct_url.json")), found[0])
    direct = dist.read_text("direct_url.json")
    if direct:
        info = json.loads(direct)
        url = info.get("url", "")
        if url.startswith("file://"):
            path = url[len("file://") :]
            if info.get("dir_info", {}).get("editable"):
                return ["-e", f"{path}{suffix}"]
            if os.path.isdir(path):
                return [f"{path}{suffix}"]
    return [f"{dist.metadata['Name']}{suffix}=={dist.version}"]


def _plan(meta: WorkerMetadata, distribution: str, extras: tuple[str, ...]) -> tuple[list[str], str]:
    """(pip arguments, key) for a build of ``meta``'s environment with ``extras``."""
    env = meta.environment
    assert env is not None
    unknown = sorted(set(extras) - set(env.optional))
    if unknown:
        known = ", ".join(env.optional) or "none"
        raise UsageError(f"worker {meta.name!r} has no environment extra(s) {', '.join(unknown)}; known: {known}")
    requirements = list(env.requirements) + [r for name in extras for r in env.optional[name]]
    host = HOST_DISTRIBUTION
    host_extras = set(env.host_extras)
    args = list(requirements)
    if _canonical(distribution) == _canonical(host):  # not dist.metadata: it parses the whole README
        args += _distribution_requirement(host, host_extras)
    else:
        args += _distribution_requirement(host, host_extras) + _distribution_requirement(distribution, set())
    # A source tree's pyproject.toml (dependencies, entry points) is part of what a build installed.
    sources = [a.split("[")[0] for a in args if a.startswith("/")]
    projects = {path: _digest(Path(path) / "pyproject.toml") for path in sources}
    identity = json.dumps(
        {"args": args, "python": sys.version_info[:2], "extras": sorted(extras), "projects": projects}
    )
    return args, hashlib.sha256(identity.encode()).hexdigest()[:12]


def _canonical(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _pointer(root: Path, worker: str) -> dict[str, Any] | None:
    try:
        with open(root / f"{worker}.json", encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _python(path: Path) -> Path:
    return path / "bin" / "python"


def status(meta: WorkerMetadata, distribution: str) -> EnvironmentStatus:
    """Whether ``meta``'s runs can execute now, and with which interpreter (no subprocess)."""
    if meta.environment is None:
        return EnvironmentStatus(meta.name, "host", sys.executable)
    root = _private_root(create=False)
    pointer = _pointer(root, meta.name)
    command = install_command(meta.name)
    if pointer is None:
        return EnvironmentStatus(meta.name, "missing", "", detail=f"not installed: run `{command}`")
    extras = tuple(pointer.get("extras") or ())
    path = root / str(pointer.get("name", ""))
    try:
        _args, key = _plan(meta, distribution, extras)
    except UsageError as exc:
        return EnvironmentStatus(meta.name, "stale", "", path, extras, f"{exc}; run `{command}`")
    if path.name != f"{meta.name}-{key}":
        return EnvironmentStatus(
            meta.name,
            "stale",
            "",
            path,
            extras,
            f"built for other requirements: run `{install_command(meta.name, extras)}`",
        )
    if not (path / MARKER).is_file() or not os.access(_python(path), os.X_OK):
        return EnvironmentStatus(
            meta.name, "broken", "", path, extras, f"{path} is incomplete: run `{install_command(meta.name, extras)}`"
        )
    return EnvironmentStatus(meta.name, "ready", str(_python(path)), path, extras)


_CHECK_PINS = """
import json, sys
from importlib import metadata
found = {}
for name in json.loads(sys.argv[1]):
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


def check_pins(python: str, requirements: tuple[str, ...] | list[str]) -> list[str]:
    """Problems with the ``==`` pins of ``requirements`` in the environment of ``python``
    (a package missing or at another version); the interpreter not running is one too."""
    pins = {m.group(1): m.group(2) for m in map(_PIN.match, requirements) if m}
    try:
        done = subprocess.run(
            python_command(python, "-c", _CHECK_PINS, json.dumps(sorted(pins))),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=NEUTRAL_CWD,
            stdin=subprocess.DEVNULL,
        )
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return [f"its interpreter {python} does not run: {exc}"]
    if found is None:
        return [f"its interpreter {python} failed: {done.stderr.strip().splitlines()[-1:]}"]
    return [
        f"{name} is {found[name] or 'missing'}, pinned {version}"
        for name, version in sorted(pins.items())
        if not _pin_holds(found.get(name), version)
    ]


def _pin_holds(installed: str | None, pinned: str) -> bool:
    """``==pinned`` as pip reads it: a pin without a local label (``torch==2.13.0``) holds for
    any local build of that version (``2.13.0+cpu``)."""
    if installed is None:
        return False
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


def preflight(meta: WorkerMetadata, distribution: str) -> EnvironmentStatus:
    """The environment a run of ``meta`` executes in, checked (interpreter, pins); a
    UsageError (exit 2) names what is wrong and the install command."""
    found = status(meta, distribution)
    if found.state == "host":
        return found
    if not found.ready:
        raise UsageError(f"worker {meta.name!r} runs in its own environment, which is {found.detail}")
    assert meta.environment is not None
    requirements = list(meta.environment.requirements) + [
        r for name in found.extras for r in meta.environment.optional.get(name, ())
    ]
    problems = check_pins(found.python, requirements)
    if problems:
        raise UsageError(
            f"worker {meta.name!r}'s environment {found.path} does not match its pins "
            f"({'; '.join(problems)}): run `{install_command(meta.name, found.extras)}`"
        )
    return found


def install(
    meta: WorkerMetadata,
    distribution: str,
    extras: tuple[str, ...] = (),
    force: bool = False,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> EnvironmentStatus:
    """Build (or reuse) ``meta``'s environment with ``extras``; idempotent. A failed build is
    removed whole and reported in one line naming the package pip could not install."""
    if meta.environment is None:
        return EnvironmentStatus(meta.name, "host", sys.executable, detail="runs in the host's venv")
    root = _private_root(create=True)
    args, key = _plan(meta, distribution, tuple(sorted(set(extras))))
    path = root / f"{meta.name}-{key}"
    lock_fd = os.open(root / f"{meta.name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        current = status(meta, distribution)
        if current.state == "ready" and current.path == path and not force:
            say(f"worker {meta.name!r}: environment ready at {path}")
            return current
        shutil.rmtree(path, ignore_errors=True)  # a partial build of this key, or --force
        say(f"worker {meta.name!r}: building its environment at {path} (pip: {' '.join(args)})")
        try:
            _build(path, args, meta.name)
            requirements = list(meta.environment.requirements) + [
                r for n in extras for r in meta.environment.optional[n]
            ]
            problems = check_pins(str(_python(path)), requirements)
            if problems:
                raise UsageError(
                    f"worker {meta.name!r}'s environment does not hold its pins after the build: " + "; ".join(problems)
                )
            write_json_atomic(
                path / MARKER,
                {
                    "worker": meta.name,
                    "key": key,
                    "pip_args": args,
                    "extras": sorted(set(extras)),
                    "python": sys.version.split()[0],
                },
            )
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        previous = _pointer(root, meta.name)
        write_json_atomic(root / f"{meta.name}.json", {"name": path.name, "extras": sorted(set(extras))})
        if previous and previous.get("name") not in (None, path.name) and "/" not in str(previous["name"]):
            shutil.rmtree(root / str(previous["name"]), ignore_errors=True)
        say(f"worker {meta.name!r}: environment ready at {path}")
        return status(meta, distribution)
    finally:
        os.close(lock_fd)


def _build(path: Path, args: list[str], worker: str) -> None:
    # -I and the (private) venvs root as cwd: a venv.py or pip.py where the user stands never runs.
    root = path.parent
    base = getattr(sys, "_base_executable", sys.executable)
    try:
        made = subprocess.run(
            python_command(base, "-m", "venv", str(path)),
            cwd=root,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        made = subprocess.CompletedProcess([], 1, "", f"{base}: {exc.strerror or exc}")
    if made.returncode != 0:
        said = [line.strip() for line in (made.stderr + made.stdout).splitlines() if line.strip()]
        raise UsageError(
            f"worker {worker!r}'s environment failed to build: `{base} -m venv {path}` failed: "
            f"{said[-1] if said else f'exit code {made.returncode}'}"
        )
    os.chmod(path, 0o700)
    log = root / f"{worker}.install.log"
    command = python_command(
        str(_python(path)), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *args
    )
    with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root)
    if done.returncode != 0:
        text = log.read_text(encoding="utf-8", errors="replace")
        raise UsageError(
            f"worker {worker!r}'s environment failed to build: {_pip_failure(text)}; "
            f"the partial environment was removed (pip's output: {log})"
        )


def _pip_failure(output: str) -> str:
    """The package pip could not install, in pip's words, from its output: a requirement no
    index satisfies, or the package pip was collecting or building when the first error came."""
    for pattern in _PIP_FAILURES:
        match = pattern.search(output)
        if match:
            return f"pip could not install {match.group(1).rstrip(':,')}"
    lines = [line.strip().lstrip("×").strip() for line in output.splitlines()]
    working_on = None
    for number, line in enumerate(lines):
        match = _WORKING_ON.match(line)
        if match:
            working_on = match.group(1)
        elif line.lower().startswith("error") and working_on:
            reason = next((later for later in lines[number:] if "did not run successfully" in later), line)
            return f"pip could not install {working_on} ({reason.rstrip('.')})"
    errors = [line for line in lines if line.startswith("ERROR:")]
    return errors[-1] if errors else (lines[-1] if lines else "pip failed")


def ask_environment(
    python: str, module: str, args: list[str], *, worker: str, timeout: float = 120, remember: bool = False
) -> dict[str, Any]:
    """``python -m MODULE ARGS`` in a worker's environment: its last line of output, a JSON object.

    How a worker asks its own libraries what the host cannot import (RLlib's, XuanCe's: does this
    config hold, which envs are there); a failure is one line naming the reinstall. With
    ``remember``, an answer naming no ``problems`` is kept in the environment (``<env>/mosaic-answers/``)
    and given again without a process, keyed by the arguments, the environment's packages (its
    site-packages' listing changes when pip installs or removes one) and the asking package's code:
    the seeds of an experiment, a resume or a rerun then check their config once (about 3 s of
    importing RLlib each)."""
    key = _answer_key(python, module, args) if remember else None
    if key is not None:
        try:
            kept = json.loads(read_private_text(key))
        except (OSError, ValueError):
            kept = None
        if isinstance(kept, dict) and not kept.get("problems"):
            return kept
    try:
        done = subprocess.run(
            python_command(python, "-m", module, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=NEUTRAL_CWD,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"the {worker} worker's environment ({python}) did not answer: {exc}") from exc
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        last = (done.stderr.strip().splitlines() or lines or ["no output"])[-1]
        raise UsageError(
            f"the {worker} worker's environment ({python}) could not answer `{module} {args[0]}`: {last}; "
            f"run `mosaic workers install {worker} --force`"
        )
    if key is not None and not answer.get("problems"):
        try:
            key.parent.mkdir(mode=0o700, exist_ok=True)
            write_json_atomic(key, answer, mode=0o600)
        except OSError:
            pass  # not kept: asked again next time
    return answer


def _answer_key(python: str, module: str, args: list[str]) -> Path | None:
    """Where an answer of the environment of ``python`` to ``module args`` is kept (None: a Python
    outside a venv of its own, whose answers are not kept)."""
    root = Path(python).parent.parent
    packages = sorted(root.glob("lib/python*/site-packages"))
    spec = importlib.util.find_spec(module.split(".")[0])
    if not (root / "pyvenv.cfg").is_file() or not packages or spec is None or not spec.submodule_search_locations:
        return None
    digest = hashlib.sha256(json.dumps([python, module, args]).encode())
    for folder in packages:
        digest.update(str(folder.stat().st_mtime_ns).encode())
    for location in spec.submodule_search_locations:
        for source in sorted(Path(location).glob("*.py")):
            digest.update(source.name.encode() + source.read_bytes())
    return root / ANSWERS / f"{digest.hexdigest()[:32]}.json"
