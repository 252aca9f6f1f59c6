"""The trainer daemon as the page sees it, through :mod:`mosaic_core.trainer.client`.

Every call has a short deadline and turns into a JSON-ready answer: a daemon that is not
configured, gone or refusing never raises past here but says so in one line.
"""

from __future__ import annotations

import json
from typing import Any

from mosaic_core import MosaicError, UsageError

STATE_TIMEOUT_S = 3.0


class DaemonError(Exception):
    """A daemon call failed; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class DaemonLink:
    def __init__(self, target: str | None, token: str | None = None):
        self.target, self.token = target, token  # the daemon's client token (mosaic_core.trainer.auth)

    def _require(self) -> str:
        if not self.target:
            raise DaemonError(
                "no trainer daemon configured: start the dashboard with "
                "`mosaic serve --target HOST:PORT` (e.g. 127.0.0.1:50055)",
                409,
            )
        return self.target

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        target = self._require()
        kwargs.setdefault("token", self.token)
        try:
            return function(target, *args, **kwargs)
        except UsageError as exc:
            raise DaemonError(str(exc), 400) from None
        except MosaicError as exc:
            text = str(exc)
            raise DaemonError(text, 503 if "no trainer daemon answered" in text else 502) from None

    def state(self) -> dict[str, Any]:
        """Health, queue and workers; ``ok: false`` with the reason when the daemon is not there."""
        if not self.target:
            return {"configured": False, "ok": False, "error": str(self._safe_require())}
        from mosaic_core.trainer import client

        try:
            health = self._call(client.health, timeout=STATE_TIMEOUT_S)
            runs = [client.record_to_dict(r) for r in self._call(client.list_runs, timeout=STATE_TIMEOUT_S)]
            workers = self.workers()
        except DaemonError as exc:
            return {"configured": True, "target": self.target, "ok": False, "error": str(exc)}
        return {
            "configured": True,
            "target": self.target,
            "ok": True,
            "health": {
                "healthy": health.healthy,
                "pid": health.pid,
                "running": health.running,
                "queued": health.queued,
                "max_concurrent": health.max_concurrent,
                "accepting": health.accepting,
                "listen_address": health.listen_address,
            },
            "runs": runs,
            "workers": workers,
        }

    def _safe_require(self) -> str:
        try:
            self._require()
        except DaemonError as exc:
            return str(exc)
        return ""

    def workers(self) -> list[dict[str, Any]]:
        from mosaic_core.trainer import client

        found = []
        for info in self._call(client.list_workers, timeout=STATE_TIMEOUT_S * 3):
            try:
                metadata = json.loads(info.metadata_json) if info.metadata_json else None
            except ValueError:
                metadata = None
            found.append(
                {
                    "name": info.name,
                    "status": info.status,
                    "error": info.error or None,
                    "distribution": info.distribution,
                    "metadata": metadata,
                }
            )
        return found

    def runs(self) -> list[dict[str, Any]]:
        """The daemon's run records, or [] when it cannot be reached (the list still shows run dirs)."""
        if not self.target:
            return []
        from mosaic_core.trainer import client

        try:
            return [client.record_to_dict(r) for r in self._call(client.list_runs, timeout=STATE_TIMEOUT_S)]
        except DaemonError:
            return []

    def submit(self, config: dict[str, Any]) -> dict[str, Any]:
        from mosaic_core.trainer import client

        reply = self._call(client.submit, json.dumps(config), run_id=config.get("run_id", ""))
        return {"run_id": reply.run_id, "digest": reply.digest}

    def cancel(self, run_id: str) -> dict[str, Any]:
        from mosaic_core.trainer import client

        self._call(client.cancel, run_id)
        record = next((r for r in self._call(client.list_runs, timeout=STATE_TIMEOUT_S) if r.run_id == run_id), None)
        return client.record_to_dict(record) if record is not None else {"run_id": run_id}
