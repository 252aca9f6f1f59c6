"""The runs root a command reads: ``--runs-dir`` or the default, the owner's own (never another
user's, nor one others can write)."""

from __future__ import annotations

from pathlib import Path

from mosaic_core import UsageError


def runs_root(value: str | None, must_exist: bool = True) -> Path:
    """``value`` (``--runs-dir``) or the default root; a usage error when it is missing
    (``must_exist``) or not the owner's own."""
    from mosaic_core.toolkit import check_runs_root, default_runs_root

    root = Path(value) if value else default_runs_root()
    if must_exist and not root.is_dir():
        where = "--runs-dir" if value else "the default runs root"
        raise UsageError(f"no runs directory at {root} ({where}); pass --runs-dir DIR")
    try:
        check_runs_root(root.absolute())  # another user's root, or one others can write: never read
    except OSError as exc:
        raise UsageError(str(exc)) from None
    return root
