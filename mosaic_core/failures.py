"""Why a training process failed, read from the end of its stderr.

The exception that ended a Python process is the last line of its last traceback (chained
tracebacks print the cause first, the fatal one last); warnings and log lines printed after
it, or between, are not the reason. Without a traceback, the last line that reads like an
error is, and failing that the last line at all.
"""

from __future__ import annotations

import re

_ERRORISH = re.compile(r"\b(error|exception|fatal|traceback|killed|abort(ed)?|segmentation fault|failed)\b", re.I)
_WARNING = re.compile(r"\bwarn(ing)?\b|logger\.warn|warnings\.warn", re.I)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|[A-Z]\w*)(: .*)?$")


def failure_reason(lines: list[str]) -> str | None:
    """The line that says why the process failed, or None when ``lines`` say nothing."""
    lines = [line.rstrip() for line in lines]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            if line and not line[0].isspace() and _EXCEPTION_LINE.match(line):
                return line.strip()
    for line in reversed(lines):
        if line.strip() and _ERRORISH.search(line) and not _WARNING.search(line):
            return line.strip()
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return None
