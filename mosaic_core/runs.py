"""Run directories and the run context host hooks receive.

``<runs root>/<run_id>/`` (root ``var/trainer/runs`` under the current directory unless
overridden) holds ``config.json`` (redacted), ``logs/``, ``events.jsonl``, TensorBoard
events, ``videos/``, checkpoints and ``analytics.json``. Every path taken from config must
resolve inside it: :meth:`RunDirectory.inside` is the one check for that.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core.config import WorkerConfig, check_run_id, redact
from mosaic_core.errors import ConfigError

DEFAULT_RUNS_ROOT = Path("var/trainer/runs")
RUNS_ROOT_VAR = "MOSAIC_RUNS_DIR"


def default_runs_root() -> Path:
    return Path(os.environ.get(RUNS_ROOT_VAR) or DEFAULT_RUNS_ROOT)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename: readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        return self.path / "analytics.json"

    @property
    def cancel_note(self) -> Path:
        """Where whoever signals a run may first write why (one line); see :func:`read_cancel_note`."""
        return self.path / "cancel_reason.txt"

    def log(self, worker: str, stream: str) -> Path:
        return self.logs / f"{worker}.{stream}.log"

    @classmethod
    def for_run(cls, runs_root: Path | str | None, run_id: str) -> "RunDirectory":
        check_run_id(run_id)
        return cls(Path(runs_root or default_runs_root()).absolute(), run_id)

    def create(self) -> "RunDirectory":
        self.logs.mkdir(parents=True, exist_ok=True)
        return self

    def inside(self, relative: str | Path, field_name: str = "path") -> Path:
        """Resolve a path from config against the run dir; refuse anything outside it."""
        base = self.path.resolve()
        target = (base / relative).resolve()
        if target != base and base not in target.parents:
            raise ConfigError(f"{relative!s} resolves outside the run directory {base}", field=field_name)
        return target

    def relative(self, path: Path | str) -> str:
        return os.path.relpath(Path(path).resolve(), self.path.resolve())

    def write_config(self, config: WorkerConfig, extra: dict[str, Any] | None = None) -> None:
        write_json_atomic(self.config, redact({**config.to_dict(redacted=False), **(extra or {})}))


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
    emitter: Any = None  # mosaic_core.events.EventEmitter once the run starts
    state: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    quiet: bool = False  # --quiet: no human-facing progress on stderr

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
