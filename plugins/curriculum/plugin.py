"""Hook implementations of the curriculum plugin."""

from mosaic_core.hookspecs import hookimpl  # noqa: F401
