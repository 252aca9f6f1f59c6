"""The hook the curriculum plugin declares (through its ``mosaic_hookspecs``) and implements: its
preset schedules, for code that names them without importing this plugin (the CleanRL worker's
``cleanrl_worker.wrappers.curriculum``, where MOSAIC's users import the BabyAI presets from)."""

from __future__ import annotations

from typing import Any

from mosaic_core import ISOLATE, hookspec


@hookspec(ISOLATE)
def mosaic_curriculum_presets() -> dict[str, list[dict[str, Any]]] | None:
    """Preset schedules by name (``extras.curriculum_schedule`` accepts the names), each a list
    of stages (``{"env_id": ..., "until": ...}``); the caller gets copies.
    Failure: isolate (that plugin's presets are missing).

    **Example:**

    .. code-block:: python

        @hookimpl(optionalhook=True)
        def mosaic_curriculum_presets():
            return {"doorkey": [{"env_id": "MiniGrid-DoorKey-5x5-v0", "until": "steps>=200000"}]}
    """
