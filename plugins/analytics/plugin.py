"""Hook implementations of the analytics plugin."""

from mosaic_core.hookspecs import hookimpl  # noqa: F401
