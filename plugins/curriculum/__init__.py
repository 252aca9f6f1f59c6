"""MOSAIC curriculum plugin: switch environments stage by stage during one training run.

Hooks in :mod:`mosaic_curriculum.plugin` (design notes there); schedules and presets in
:mod:`mosaic_curriculum.schedule`.
"""
