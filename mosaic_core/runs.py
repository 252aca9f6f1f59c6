"""Run directories and the run context host hooks receive.

``<runs root>/<run_id>/`` (root: see :func:`default_runs_root`) holds ``config.json``
(redacted), ``logs/``, ``events.jsonl``, TensorBoard
events, ``videos/``, checkpoints and ``manifest.json``. Every path taken from config must
resolve inside it: :meth:`RunDirectory.inside` is the one check for that.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core.config import RUN_ID, WorkerConfig, check_run_id, redact
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.files import check_ancestors, check_own_dir, is_within, read_private_text, run_umask, write_json_atomic

if TYPE_CHECKING:
    from mosaic_core.events import EventEmitter

DEFAULT_RUNS_ROOT = Path("var/trainer/runs")
RUNS_ROOT_VAR = "MOSAIC_RUNS_DIR"
MANIFEST_NAME = "manifest.json"  # the run's manifest (:mod:`mosaic_core.manifest`)
# The manifest's name before it was neutral: runs written then keep it and are still read. (A
# plugin may write a file of that name beside manifest.json, in MOSAIC's shape: it has no
# ``schema``, and is never taken for an old manifest.)
OLD_MANIFEST_NAMES = ("analytics.json",)
MANIFEST_SCHEMA = "mosaic.manifest/1"
OLD_MANIFEST_SCHEMAS = ("mosaic.analytics/1",)  # runs written before the rename (the same fields)
OLD_MANIFEST_PEEK_BYTES = 4 * 2**20  # read of an old-named file to tell (a longer one is taken for a manifest)


def manifest_of(run_dir: Path) -> Path:
    """The manifest a run directory holds: ``manifest.json``, else an old manifest under the older
    name (a run written before the rename), else ``manifest.json`` (none yet)."""
    current = run_dir / MANIFEST_NAME
    if current.exists():
        return current
    return next((run_dir / old for old in OLD_MANIFEST_NAMES if _is_old_manifest(run_dir / old)), current)


def _is_old_manifest(path: Path) -> bool:
    """Whether ``path`` is one of our old manifests: every one had a ``schema``; a file in MOSAIC's
    own shape (no ``schema``) is not. A damaged one is, so its reader says what is wrong."""
    try:
        data = json.loads(read_private_text(path, OLD_MANIFEST_PEEK_BYTES))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    return not isinstance(data, dict) or "schema" in data


def default_runs_root(cwd: Path | None = None) -> Path:
    """Where runs live when ``--runs-dir`` is not given, found the same way from anywhere:
    ``$MOSAIC_RUNS_DIR``; else the nearest ``var/trainer/runs`` in the current directory or
    one of its parents (a project's runs, from any of its subfolders); else
    ``./var/trainer/runs`` (created by the first run).

    The upward search visits only folders we own that nobody else can write: it stops below
    the first other one (``/home``, ``/tmp``), so a ``var/trainer/runs`` another user planted
    there (``/tmp/var/trainer/runs``) is never found."""
    if os.environ.get(RUNS_ROOT_VAR):
        return Path(os.environ[RUNS_ROOT_VAR]).absolute()
    here = (cwd or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if not _private_folder(folder):
            break
        if (folder / DEFAULT_RUNS_ROOT).is_dir():
            return folder / DEFAULT_RUNS_ROOT
    return here / DEFAULT_RUNS_ROOT


def _private_folder(folder: Path) -> bool:
    try:
        check_own_dir(folder)
    except OSError:
        return False
    return True


def check_runs_root(root: Path) -> None:
    """Refuse a runs root (and the ``var/trainer`` folders above a default one) that is not a
    directory we own and only we can write: another user could swap a run directory in it for
    a link to theirs; and one inside a folder another user could rename it out of
    (:func:`~mosaic_core.files.check_ancestors`). UntrustedPath names the path and the owner. A
    root that does not exist yet is checked on the folders it will be made in."""
    if not (root.exists() or root.is_symlink()):
        check_ancestors(root, "runs root")  # where it will be made
        return
    check_own_dir(os.path.realpath(root), "runs root")  # a link to a root of ours is fine
    check_ancestors(root, "runs root")
    if root.name == DEFAULT_RUNS_ROOT.name and root.parent.name == "trainer" and root.parent.parent.name == "var":
        for folder in (root.parent, root.parent.parent):
            check_own_dir(os.path.realpath(folder), "runs root folder")


def make_runs_root(root: Path) -> int:
    """Make ``root`` (and the folders above it) when missing, then check it
    (:func:`check_runs_root`); the mode of run folders (0700, 0750 when shared with the group)."""
    mode = 0o777 & ~run_umask()
    new_root = not root.exists()
    root.mkdir(parents=True, exist_ok=True, mode=mode)
    if new_root and root.name == DEFAULT_RUNS_ROOT.name:
        print(
            f"mosaic: note: made a new runs root {root} (no var/trainer/runs of yours above "
            f"{root.parent.parent.parent}); set --runs-dir or ${RUNS_ROOT_VAR} to use another",
            file=sys.stderr,
        )
    check_runs_root(root)
    return mode


JOBS_FOLDER = ".jobs"  # in a runs root: what launchers write for a batch (a sweep's job array)


def job_folder(root: Path, name: str) -> Path:
    """A new folder for a job's own files (a job array's script, its tasks' output and exit
    codes): ``<runs root>/.jobs/<name>``, on the storage the runs root is on (a cluster's nodes
    share it), inside the checked runs root, each folder 0700 and ours. ``name`` must be new.
    Raises UntrustedPath (an OSError) naming what is wrong."""
    make_runs_root(root)
    jobs = root / JOBS_FOLDER
    jobs.mkdir(mode=0o700, exist_ok=True)
    check_own_dir(jobs, "jobs folder")
    folder = jobs / name
    folder.mkdir(mode=0o700)  # new: nothing of anyone else's is in it
    check_own_dir(folder, "job folder")
    return folder


def find_run_dir(root: Path, ref: str) -> Path:
    """The directory of the run ``ref`` names under ``root``: its id, or a prefix of exactly one
    id (26-character ids need not be typed whole). A UsageError lists the ambiguous matches or
    suggests close ids."""
    if not isinstance(ref, str) or not RUN_ID.fullmatch(ref):  # an id or its prefix; never a path or a page
        raise ConfigError(
            f"{ref[:200] if isinstance(ref, str) else ref!r} is not a run id (letters, digits, - and _, at most 128)",
            field="run_id",
        )
    check_runs_root(root)
    if (root / ref).is_dir():
        return _own_run_dir(root / ref)
    known = (
        sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")) if root.is_dir() else []
    )
    matches = [name for name in known if name.startswith(ref)]
    if len(matches) == 1:
        return _own_run_dir(root / matches[0])
    if matches:
        shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more" if len(matches) > 5 else "")
        raise UsageError(f"run id prefix {ref!r} matches {len(matches)} runs under {root}: {shown}; type more of it")
    import difflib

    close = difflib.get_close_matches(ref, known, n=3)
    hint = (
        f"; did you mean {', '.join(close)}?" if close else (f"; see `mosaic runs --runs-dir {root}`" if known else "")
    )
    raise UsageError(f"no run {ref!r} under {root}{hint}")


def _own_run_dir(path: Path) -> Path:
    try:
        check_own_dir(path, "run directory")  # a link, another user's: one line, exit 2
    except OSError as exc:
        raise UsageError(str(exc)) from None
    return path


@dataclass(frozen=True)
class RunDirectory:
    root: Path
    run_id: str

    @property
    def path(self) -> Path:
        return self.root / self.run_id

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def events(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def manifest(self) -> Path:
        """Where the host writes the manifest (read an existing run's with :func:`manifest_of`)."""
        return self.path / MANIFEST_NAME

    @property
    def cancel_note(self) -> Path:
        """Where whoever signals a run may first write why (one line); see :func:`read_cancel_note`."""
        return self.path / "cancel_reason.txt"

    def log(self, worker: str, stream: str) -> Path:
        return self.logs / f"{worker}.{stream}.log"

    @classmethod
    def for_run(cls, runs_root: Path | str | None, run_id: str) -> RunDirectory:
        check_run_id(run_id)
        return cls(Path(runs_root).absolute() if runs_root else default_runs_root(), run_id)

    def check_usable(self, existing_ok: bool = False) -> None:
        """Refuse, before anything starts, a runs root that is not a writable directory (or
        cannot become one) and a run id that already has a directory (even a dangling link),
        unless ``existing_ok`` (a resume or a restart of that run: then it must be ours)."""
        root = self.root
        probe = root
        while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            what = "is not a directory" if probe == root else f"cannot be created: {probe} is not a directory"
            raise ConfigError(f"runs directory {root} {what}", field="runs_dir")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ConfigError(f"runs directory {root} is not writable ({probe} refuses new entries)", field="runs_dir")
        try:
            check_runs_root(root)
        except OSError as exc:
            raise ConfigError(str(exc), field="runs_dir") from None
        if existing_ok and (self.path.exists() or self.path.is_symlink()):
            try:
                check_own_dir(self.path, "run directory")
            except OSError as exc:
                raise ConfigError(str(exc), field="run_id") from None
        elif self.path.exists() or self.path.is_symlink():
            raise ConfigError(
                f"run {self.run_id!r} already exists in {root}; choose another --run-id "
                "(or leave it out to get a new one)",
                field="run_id",
            )

    def create(self) -> RunDirectory:
        """Make the run directory (0700, or 0750 when runs are shared with the group; the
        process umask must be :func:`run_umask` for its files): it must be new and ours."""
        mode = make_runs_root(self.root)
        try:
            self.path.mkdir(mode=mode)
        except FileExistsError:
            pass  # made by this run a moment ago (check_usable refused any earlier entry)
        check_own_dir(self.path, "run directory")
        self.logs.mkdir(mode=mode, exist_ok=True)
        check_own_dir(self.logs, "run logs directory")
        return self

    def inside(self, relative: str | Path, field_name: str = "path") -> Path:
        """Resolve a path from config against the run dir; refuse anything outside it."""
        base = self.path.resolve()
        target = (base / relative).resolve()
        if not is_within(base, target):
            raise ConfigError(f"{relative!s} resolves outside the run directory {base}", field=field_name)
        return target

    def relative(self, path: Path | str) -> str:
        return os.path.relpath(Path(path).resolve(), self.path.resolve())

    @property
    def launch(self) -> Path:
        return self.path / "launch.json"

    def write_config(self, config: WorkerConfig, worker: str, launch: dict[str, Any] | None = None) -> None:
        """``config.json``: the worker config plus ``"worker"`` (secrets redacted), loadable by
        ``mosaic run --config`` to repeat the run; ``launch.json``: what was started."""
        write_json_atomic(self.config, redact({**config.to_dict(redacted=False), "worker": worker}))
        if launch is not None:
            write_json_atomic(self.launch, redact(launch))


def read_cancel_note(directory: RunDirectory, limit: int = 500) -> str | None:
    """The first line of the run's cancel note (e.g. a sweep's pruning decision), or None."""
    try:
        with open(directory.cancel_note, encoding="utf-8", errors="replace") as handle:
            line = handle.readline(limit).strip()
    except OSError:
        return None
    return line or None


@dataclass
class RunContext:
    """What host hooks receive about one run. ``state`` is scratch space keyed by plugin."""

    config: WorkerConfig
    directory: RunDirectory
    worker: str
    emitter: EventEmitter | None = None  # once the run starts
    state: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    quiet: bool = False  # --quiet: no human-facing progress on stderr
    options: dict[str, Any] = field(default_factory=dict)  # the worker's own flags
    plugin_args: list[str] = field(default_factory=list)  # from mosaic_build_args
    worker_extras: dict[str, Any] = field(default_factory=dict)  # extras no plugin owns
    human: bool = False  # a person watches at a terminal: show lines, not JSON, on stdout
    # A dry run or a daemon's submission: the worker runs its thorough checks too (e.g. making the
    # env to read its spaces); a real run leaves those to the training process, to start fast.
    dry_run: bool = True
    # The interpreter of the worker's environment (mosaic_core.environments); the host's own
    # for a worker without one. A worker's plan starts its Python training program with it.
    python: str = field(default_factory=lambda: sys.executable)
    # Typed settings plugins published for the worker (mosaic_run_settings): see setting().
    settings: tuple[Any, ...] = ()
    # The child events the worker declared (Worker.child_events), besides the host's and plugins'.
    worker_events: frozenset[str] = frozenset()
    # How the worker's checkpoints look (Worker.checkpoint_layout; mosaic_core.contract), or None.
    checkpoint_layout: Any = None
    # A resume of an existing run (mosaic_core.resume.Resume): run_resumed is its first event.
    resume: Any = None

    def setting(self, kind: type) -> Any:
        """The published setting of type ``kind`` (e.g. ``TrackingSettings``), or None."""
        return next((s for s in self.settings if isinstance(s, kind)), None)

    @property
    def run_id(self) -> str:
        return self.config.run_id

    @property
    def run_dir(self) -> Path:
        return self.directory.path

    def emit(self, event: str, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if self.emitter is None:
            raise RuntimeError("the run has not started: no event emitter yet")
        return self.emitter.emit(event, payload)
