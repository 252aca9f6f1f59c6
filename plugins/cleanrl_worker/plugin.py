"""Hook implementations of the cleanrl_worker plugin."""

from mosaic_core.hookspecs import hookimpl  # noqa: F401
