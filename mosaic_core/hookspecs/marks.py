"""The hook markers and the failure policies every hook spec carries (:mod:`mosaic_core.hookspecs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "mosaic"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

STOP, ISOLATE = "stop", "isolate"


def spec(policy: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a hook spec carrying its failure policy (``STOP`` or ``ISOLATE``):
    the policy lives on the spec, and :data:`POLICY` is read from the specs at import."""
    if policy not in (STOP, ISOLATE):
        raise ValueError(f"a hook's failure policy is {STOP!r} or {ISOLATE!r}, got {policy!r}")

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function.mosaic_policy = policy  # type: ignore[attr-defined]
        marked: Callable[..., Any] = hookspec(**options)(function)
        return marked

    return mark
