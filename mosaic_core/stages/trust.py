"""The trust stage: code a run would execute (a script its config names, the launch's own code
paths) is declared well, held to a daemon's script policy first (so its refusal never tells
whether a file exists), and refused when it lies in an imported, untrusted run
(:mod:`mosaic_core.runstore.trust`). The resolve stage checks a config's paths before any default
reads them; the plan stage checks the launch's after the worker planned it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.types import CodePath, Launch
from mosaic_core.worker import Worker, declare


def code_check(
    worker_item: LoadedEntryPoint, worker: Worker, check_code: Callable[[list[CodePath]], None] | None
) -> Callable[[dict[str, Any]], list[CodePath]]:
    """The check of a config's code paths (the worker's ``code_paths``): declared well by every
    run, untrusted imports refused, and held to a daemon's policy (``check_code``) first."""

    def code(mapping: dict[str, Any]) -> list[CodePath]:
        paths = declare(worker_item, "code_paths(data)", lambda: worker.code_paths(mapping), CodePath)
        if check_code is not None:
            check_code(paths)
        refuse_untrusted_code(paths)
        return paths

    return code


def check_launch(launch: Launch, check_code: Callable[[list[CodePath]], None] | None) -> None:
    """The launch's code paths (``Launch`` checked they are CodePaths) held to the policy, then to trust."""
    if check_code is not None:
        check_code(list(launch.code_paths))
    refuse_untrusted_code(list(launch.code_paths))


def refuse_untrusted_code(paths: list[CodePath]) -> None:
    """Nothing in an imported, untrusted run executes (:mod:`mosaic_core.runstore.trust`)."""
    from mosaic_core.runstore.trust import refuse_untrusted

    for code in paths:
        refuse_untrusted(code.path, f"{code.field} {code.path}")


def refuse_untrusted_source(source: str, what: str) -> None:
    """A config that came with an imported run is someone else's: it runs once trusted."""
    from mosaic_core.runstore.trust import refuse_untrusted

    refuse_untrusted(source, what)
