"""Which runs belong together in ``mosaic plot --group``.

* ``seed``: runs that differ only by seed (:func:`mosaic_core.runstore.groups.group_by_seed`:
  the one definition ``mosaic compare`` uses too), labelled by what differs between groups;
* ``env`` / ``algo``: runs of one env id / one algorithm.
"""

from __future__ import annotations

from pathlib import Path

from mosaic_core.runstore.groups import group_by_fields, group_by_seed, mixed_budgets


def group_runs(dirs: list[Path], by: str) -> dict[str, list[Path]]:
    """Groups of ``dirs`` in first-seen order, keyed by a readable label."""
    groups = group_by_seed(dirs) if by == "seed" else group_by_fields(dirs, ["env_id" if by == "env" else "algo"])
    return {g.label: g.runs for g in groups}


def budget_warning(dirs: list[Path], by: str) -> str | None:
    return mixed_budgets(group_by_seed(dirs)) if by == "seed" else None
