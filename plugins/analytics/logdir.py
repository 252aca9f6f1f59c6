"""``extras.tensorboard_dir``: where a script's TensorBoard writers go inside the run directory.

CleanRL has no flag for it and writes ``runs/<run_name>``: that becomes
``<tensorboard_dir>/<run_name>`` (any other relative path goes below it too). Absolute paths
are left alone. The plugin's validation has already checked that ``tensorboard_dir`` stays
inside the run directory. Installed in the training process by wrapping ``SummaryWriter``'s
constructor when the script imports a writer module (nothing is imported before).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

WRITER_MODULES = ("torch.utils.tensorboard.writer", "tensorboardX.writer")


def relocate_logdir(logdir: Any, tensorboard_dir: str | None) -> Any:
    if not tensorboard_dir or not isinstance(logdir, (str, os.PathLike)) or os.path.isabs(logdir):
        return logdir
    parts = Path(logdir).parts
    return str(Path(tensorboard_dir, *(parts[1:] if parts[:1] == ("runs",) else parts)))


def install(child: Any) -> None:
    tensorboard_dir = child.extras.get("tensorboard_dir")
    if not isinstance(tensorboard_dir, str) or not tensorboard_dir:
        return
    from mosaic_core import after_import

    after_import(WRITER_MODULES, lambda module: _wrap_constructor(module, tensorboard_dir))


def _wrap_constructor(module: Any, tensorboard_dir: str) -> None:
    writer = getattr(module, "SummaryWriter", None)
    if writer is None or getattr(writer.__init__, "__mosaic_relocates__", False):
        return
    original = writer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            args = (relocate_logdir(args[0], tensorboard_dir), *args[1:])
        for key in ("log_dir", "logdir"):
            if key in kwargs:
                kwargs[key] = relocate_logdir(kwargs[key], tensorboard_dir)
        original(self, *args, **kwargs)

    __init__.__mosaic_relocates__ = True  # type: ignore[attr-defined]
    writer.__init__ = __init__
