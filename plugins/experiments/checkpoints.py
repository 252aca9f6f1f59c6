"""A recorded run's newest checkpoint, found the way the host finds it (``mosaic evaluate``,
``mosaic resume``): the run's worker says how its checkpoints look
(:meth:`mosaic_core.Worker.checkpoint_layout`)."""

from __future__ import annotations

from pathlib import Path

from mosaic_core import MosaicError
from mosaic_core.contract import Checkpoint


def newest(run_dir: Path) -> Checkpoint | None:
    """The run's newest checkpoint; None when it has none, or its worker is not here or keeps none.
    A config.json the host refuses (a ConfigError: one line naming the file and field) is raised."""
    from mosaic_core import WorkerConfig
    from mosaic_core.contract import newest_checkpoint
    from mosaic_core.toolkit import find_worker, load_worker, read_config_file

    recorded = read_config_file(run_dir / "config.json", run_file=True)
    worker_name = recorded.pop("worker", None)
    if not isinstance(worker_name, str):
        return None
    config = WorkerConfig.from_dict(recorded, source=str(run_dir / "config.json"))
    try:
        layout = load_worker(find_worker(worker_name)).checkpoint_layout(config)
    except MosaicError:  # the worker is not installed here
        return None
    return newest_checkpoint(run_dir, layout, run_dir.name) if layout else None
