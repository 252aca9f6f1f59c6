"""One place that turns errors into one clear line and an exit code (never a traceback,
unless ``--verbose``)."""

from __future__ import annotations

import sys
import traceback
from typing import Callable

from mosaic_core.errors import MosaicError


def run_cli_command(action: Callable[[], int | None], verbose: bool = False, prog: str = "mosaic") -> int:
    try:
        return int(action() or 0)
    except MosaicError as exc:
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: say so in one line; --verbose shows where
        if verbose:
            traceback.print_exc()
        print(f"{prog}: internal error: {type(exc).__name__}: {exc} (run with --verbose for the traceback)",
              file=sys.stderr)
        return 1
