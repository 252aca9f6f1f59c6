"""The live metric bridge: TensorBoard scalars of the training process, latest values on the host.

Training process: :class:`ScalarBuffer` sees every ``SummaryWriter.add_scalar`` (through the
``mosaic_on_scalar`` hook), keeps the latest value per tag plus a count and sum since the
last send (and, for an episodic return, its last ``RETURN_WINDOW`` values themselves, so the host's
moving average is of exactly the last episodes), and publishes the changed tags over the side channel at most every
``SEND_INTERVAL_S``, from the calling thread when a send is due: no thread, no syscall per
scalar. The run's first episodic return goes out at once: a user's first metric is not held back.
The last values are sent reliably when the process exits, a stopped one's too.

Host: :class:`MetricBoard` folds those messages into the run's latest values (global step,
latest and smoothed episodic return, episode length, SPS, losses). Both ends are bounded:
at most ``MAX_TAGS`` tags (room is kept for CleanRL's ``charts/``, ``losses/`` and
``eval/`` tags, so a flood of other tags cannot crowd them out), a return window of about ``RETURN_WINDOW`` episodes.
"""

from __future__ import annotations

import atexit
import math
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from mosaic_core.contract import at_stop_exit

MESSAGE_KIND = "analytics.metrics"
SEND_INTERVAL_S = 0.25
MAX_TAGS = 200  # at most this many tags per run (MAX_OTHER_TAGS outside the usual prefixes)
MAX_OTHER_TAGS = 150
USUAL_PREFIXES = ("charts/", "losses/", "eval/")
MAX_TAG_LENGTH = 128
RETURN_WINDOW = 100


class ScalarBuffer:
    """Latest scalar per tag in one process, sent in batches through ``send(kind, payload, reliable)``."""

    def __init__(
        self,
        send: Callable[..., bool],
        interval: float = SEND_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        max_tags: int = MAX_TAGS,
    ):
        self._send, self._interval, self._clock, self._max_tags = send, interval, clock, max_tags
        # tag -> [latest value, its step, updates, finite updates, sum of finite values, the last
        # RETURN_WINDOW finite values of a return tag (None for the others)] since the last send
        self._tags: dict[str, list[Any]] = {}
        self._others = 0
        self._due = clock() + interval
        self._return_seen = False  # the run's first episodic return is sent at once (the first metric)
        self._pid = os.getpid()
        self.global_step = -1
        self.dropped_tags = 0
        self.sent = 0
        self.failed = 0

    def add(self, tag: str, value: float, step: int | None) -> None:
        """Record one scalar; sends a batch when one is due."""
        entry = self._tags.get(tag)
        if entry is None:
            if not admit(tag, len(self._tags), self._others, self._max_tags):
                self.dropped_tags += 1
                return
            self._others += not tag.startswith(USUAL_PREFIXES)
            entry = self._tags[tag] = [value, step, 0, 0, 0.0, deque(maxlen=RETURN_WINDOW) if is_return(tag) else None]
        entry[0] = value
        entry[1] = step
        entry[2] += 1
        if value - value == 0:  # finite: NaN and inf fail this
            entry[3] += 1
            entry[4] += value
            if entry[5] is not None:
                entry[5].append(value)
        if step is not None and step > self.global_step:
            self.global_step = step
        if entry[5] is not None and not self._return_seen:
            self._return_seen = True
            self.flush()
        elif self._clock() >= self._due:
            self.flush()

    def flush(self, reliable: bool = False) -> bool:
        """Send the tags updated since the last send; True when a batch went out. Never raises."""
        self._due = self._clock() + self._interval
        if os.getpid() != self._pid:  # a forked copy: the parent owns these values
            return False
        changed = {
            tag: [_finite(e[0]), e[1], e[3], e[4], *([list(e[5])] if e[5] is not None else [])]
            for tag, e in self._tags.items()
            if e[2]
        }
        if not changed:
            return False
        payload = {
            "global_step": self.global_step if self.global_step >= 0 else None,
            "scalars": changed,
            "dropped_tags": self.dropped_tags,
        }
        try:
            ok = bool(self._send(MESSAGE_KIND, payload, reliable))
        except Exception:  # best effort: the bridge never breaks training
            ok = False
        if not ok:  # keep counting; the next batch carries these updates too
            self.failed += 1
            return False
        self.sent += 1
        for entry in self._tags.values():
            entry[2] = entry[3] = 0
            entry[4] = 0.0
            if entry[5] is not None:
                entry[5].clear()
        return True


def is_return(tag: str) -> bool:
    """An episodic return of the run (the team's, under any prefix): not an evaluation's, not one agent's."""
    return (tag == "episodic_return" or tag.endswith("/episodic_return")) and not tag.startswith(("eval/", "agents/"))


def admit(tag: str, count: int, others: int, max_tags: int = MAX_TAGS) -> bool:
    """Whether a new tag fits: bounded length and count, with room kept for the usual prefixes."""
    if len(tag) > MAX_TAG_LENGTH or count >= max_tags:
        return False
    return tag.startswith(USUAL_PREFIXES) or others < max_tags * MAX_OTHER_TAGS // MAX_TAGS


def _finite(value: float) -> float | None:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


_buffer: ScalarBuffer | None = None


def buffer_for(child: Any) -> ScalarBuffer:
    """This process's buffer (made on first use, flushed reliably at exit)."""
    global _buffer
    if _buffer is None:
        _buffer = ScalarBuffer(child.publish)
        atexit.register(_buffer.flush, True)
        at_stop_exit(lambda: _buffer is not None and _buffer.flush(True))  # a stopped run ends without atexit
    return _buffer


def _forget_buffer() -> None:
    global _buffer
    _buffer = None


os.register_at_fork(after_in_child=_forget_buffer)  # a forked process keeps its own values
