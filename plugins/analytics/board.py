"""The host's view of a run's live metrics, fed by the training process's scalar batches.

:class:`MetricBoard` keeps the latest value of every tag (at most ``MAX_TAGS``), the global
step, and the last ``RETURN_WINDOW`` episodes' returns for their moving average (a resumed run's
board starts from the episodes its earlier attempts recorded up to the checkpoint:
:meth:`MetricBoard.resume_from`, so the average and the step go on where they were). Its memory is
bounded whatever the training process sends (the same tag budget as the training process's
buffer); malformed entries are ignored.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Any

from mosaic_analytics.bridge import MAX_TAGS, RETURN_WINDOW, USUAL_PREFIXES, admit, is_return

RETURN_TAG = "charts/episodic_return"
LENGTH_TAG = "charts/episodic_length"
SPS_TAG = "charts/SPS"
AGENT_PREFIX = "agents/"


def classify(tag: str) -> str | None:
    """What a tag means to the board: ``return``, ``length``, ``sps``, ``loss``, ``agent`` (a
    per-agent value of a multi-agent run: ``agents/<id>/<tag>``) or None."""
    if tag.startswith(AGENT_PREFIX):
        return "agent"
    if tag.startswith("eval/"):
        return None
    if is_return(tag):
        return "return"
    if tag == LENGTH_TAG or tag.endswith("/episodic_length") or tag == "episodic_length":
        return "length"
    if tag == SPS_TAG or tag.rsplit("/", 1)[-1] in ("SPS", "sps"):
        return "sps"
    if tag.startswith("losses/"):
        return "loss"
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class MetricBoard:
    """Latest values of one run. Thread-safe: the side-channel thread writes, others read."""

    def __init__(self, total_timesteps: int | None = None, max_tags: int = MAX_TAGS, window: int = RETURN_WINDOW):
        self.total_timesteps = total_timesteps
        self._max_tags, self._window = max_tags, window
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[float | None, int | None]] = {}
        self._kinds: dict[str, str | None] = {}
        self._others = 0
        self._returns: deque[float] = deque(maxlen=window)  # the last episodes' returns
        self.global_step = 0
        self.episodes = 0
        self.batches = 0
        self.dropped_tags = 0
        self.updated_at: float | None = None
        self._version = 0
        self._emitted_version = 0
        self._last_emit = float("-inf")

    def update(self, payload: dict[str, Any]) -> bool:
        """Fold one batch in; False when it carried nothing usable."""
        scalars = payload.get("scalars")
        if not isinstance(scalars, dict):
            return False
        with self._lock:
            used = False
            for tag, entry in scalars.items():
                if not isinstance(tag, str) or not isinstance(entry, (list, tuple)) or len(entry) not in (4, 5):
                    continue
                if tag not in self._latest:
                    if not admit(tag, len(self._latest), self._others, self._max_tags):
                        self.dropped_tags += 1
                        continue
                    self._others += not tag.startswith(USUAL_PREFIXES)
                value, step, count, total = _number(entry[0]), _step(entry[1]), _step(entry[2]), _number(entry[3])
                self._latest[tag] = (value, step)
                kind = self._kinds[tag] if tag in self._kinds else self._kinds.setdefault(tag, classify(tag))
                if kind == "return" and count:
                    self._add_returns(count, total, entry[4] if len(entry) == 5 else None)
                if step is not None and step > self.global_step:
                    self.global_step = step
                used = True
            step = _step(payload.get("global_step"))
            if step is not None and step > self.global_step:
                self.global_step = step
            dropped = _step(payload.get("dropped_tags"))
            if dropped:
                self.dropped_tags = max(self.dropped_tags, dropped)
            if used:
                self.batches += 1
                self._version += 1
                self.updated_at = time.time()
            return used

    def _add_returns(self, count: int, total: float | None, values: Any) -> None:
        """``count`` more episodes ended, their returns summing to ``total``; ``values``: the last
        of those returns (a batch without them counts each episode at the batch's mean)."""
        self.episodes += count
        if isinstance(values, list):
            self._returns.extend(v for v in values[-self._window :] if _number(v) is not None)
        elif total is not None:
            self._returns.extend([total / count] * min(count, self._window))

    def resume_from(self, step: int, returns: list[float]) -> None:
        """Go on from an earlier attempt's state: its last step and its episodes' returns in order."""
        with self._lock:
            self.global_step = max(self.global_step, step)
            self.episodes += len(returns)
            self._returns.extend(returns[-self._window :])
            self._version += 1

    def _value(self, kind: str) -> float | None:
        preferred = {"return": RETURN_TAG, "length": LENGTH_TAG, "sps": SPS_TAG}[kind]
        if preferred in self._latest:
            return self._latest[preferred][0]
        for tag, (value, _step) in self._latest.items():
            if self._kinds.get(tag) == kind:
                return value
        return None

    def snapshot(self) -> dict[str, Any]:
        """The latest values as a JSON-ready dict (the ``metrics`` event payload)."""
        with self._lock:
            smoothed = sum(self._returns) / len(self._returns) if self._returns else None
            total = self.total_timesteps
            losses = {
                tag.removeprefix("losses/"): value
                for tag, (value, _s) in self._latest.items()
                if self._kinds.get(tag) == "loss"
            }
            others = {tag: value for tag, (value, _s) in self._latest.items() if self._kinds.get(tag) is None}
            agents: dict[str, dict[str, Any]] = {}
            for tag, (value, _s) in self._latest.items():
                if self._kinds.get(tag) == "agent":
                    agent, _, name = tag.removeprefix(AGENT_PREFIX).partition("/")
                    agents.setdefault(agent, {})[name] = value
            return {
                "global_step": self.global_step,
                "total_timesteps": total,
                "progress": round(min(self.global_step / total, 1.0), 6) if total else None,
                "episodic_return": self._value("return"),
                "episodic_return_smoothed": smoothed,
                "smoothed_episodes": len(self._returns),  # how many the moving average is of
                "episodic_length": self._value("length"),
                "episodes": self.episodes,
                "sps": self._value("sps"),
                "losses": losses,
                "scalars": others,
                **({"agents": agents} if agents else {}),
                "dropped_tags": self.dropped_tags,
            }

    @property
    def has_data(self) -> bool:
        return self._version > 0

    def take_due(self, interval: float, now: float | None = None) -> dict[str, Any] | None:
        """A snapshot to emit when there is news and ``interval`` seconds passed since the last one."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._version == self._emitted_version or now - self._last_emit < interval:
                return None
            self._emitted_version, self._last_emit = self._version, now
        return self.snapshot()

    def take_pending(self) -> dict[str, Any] | None:
        """A snapshot when something arrived since the last one emitted (used at the end of a run)."""
        with self._lock:
            if self._version == self._emitted_version:
                return None
            self._emitted_version = self._version
        return self.snapshot()
