"""What the analytics plugin writes into ``manifest.json`` beyond the files a run holds
(those are found by :mod:`mosaic_core.runstore.artifacts`): secrets scrubbed from every section."""

from __future__ import annotations

from typing import Any


def scrub(value: Any, secrets: list[str]) -> Any:
    """A copy of ``value`` with every occurrence of a secret string replaced by ``***``."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value
