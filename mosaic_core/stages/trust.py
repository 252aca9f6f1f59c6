"""The trust stage: code a run would execute (a script its config names, the launch's own code
paths) is held to a daemon's script policy first (so its refusal never tells whether a file
exists), and refused when it lies in an imported, untrusted run (:mod:`mosaic_core.runstore.trust`).
The resolve stage sends a config's paths (declared well, each path once) before any default reads
them; the plan stage sends the launch's after the worker planned it."""

from __future__ import annotations

from collections.abc import Callable

from mosaic_core.types import CodePath


def check_code(paths: list[CodePath], policy: Callable[[list[CodePath]], None] | None) -> None:
    """Code a run would execute (a config's code paths, a launch's): held to a daemon's script
    policy first, then refused when it lies in an imported, untrusted run."""
    from mosaic_core.runstore.trust import refuse_untrusted

    if policy is not None:
        policy(paths)
    for code in paths:
        refuse_untrusted(code.path, f"{code.field} {code.path}")


def refuse_untrusted_source(source: str, what: str) -> None:
    """A config that came with an imported run is someone else's: it runs once trusted."""
    from mosaic_core.runstore.trust import refuse_untrusted

    refuse_untrusted(source, what)
