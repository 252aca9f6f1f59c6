"""Hook implementations of the fastlane plugin."""

from mosaic_core.hookspecs import hookimpl  # noqa: F401
