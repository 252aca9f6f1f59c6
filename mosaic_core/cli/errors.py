"""One place that turns errors into one clear line and an exit code (never a traceback,
unless ``--verbose``)."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from mosaic_core.errors import MosaicError
from mosaic_core.hostsignals import StoppedBeforeStart

MAX_MESSAGE = 2000  # characters of one error line: a value a user pasted by mistake is cut, not echoed whole


def one_line(message: str) -> str:
    """``message`` as one printable line: control characters (newlines, terminal escapes) shown as
    ``?``, characters no terminal can encode (lone surrogates) escaped, the middle of a very
    long one cut."""
    from mosaic_core.files import printable

    text = printable(message).replace("\u2028", "?").replace("\u2029", "?")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_MESSAGE:
        text = f"{text[: MAX_MESSAGE // 2]} …[{len(text) - MAX_MESSAGE:,} characters cut]… {text[-MAX_MESSAGE // 2 :]}"
    return text


def run_cli_command(action: Callable[[], int | None], verbose: bool = False, prog: str = "mosaic") -> int:
    try:
        return int(action() or 0)
    except MosaicError as exc:
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except (StoppedBeforeStart, KeyboardInterrupt) as stop:
        return _stopped(stop, prog)
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: say so in one line; --verbose shows where
        behind = _stop_behind(exc)
        if behind is not None:
            return _stopped(behind, prog)
        if verbose:
            traceback.print_exc()
        print(
            f"{prog}: internal error: {type(exc).__name__}: {one_line(str(exc))} (run with --verbose for the "
            "traceback)",
            file=sys.stderr,
        )
        return 1


def _stopped(stop: BaseException, prog: str) -> int:
    if isinstance(stop, StoppedBeforeStart):  # mosaic_core.hostsignals: a run that nothing of is left
        print(stop.line(prog), file=sys.stderr)
        return 128 + stop.signum
    print(f"{prog}: interrupted", file=sys.stderr)
    return 130


def _stop_behind(exc: BaseException) -> BaseException | None:
    """The stop an error stands for: Python 3.11 reports an exception raised in a ``__set_name__``
    (where a signal's lands when it comes as a class statement runs, a dataclass's fields as a
    module is imported) as a RuntimeError caused by it."""
    cause, seen = exc.__cause__, set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (StoppedBeforeStart, KeyboardInterrupt)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None
