"""Errors a user can act on. The CLI prints their message on one line and exits with
``exit_code``; a traceback appears only with ``--verbose``."""

from __future__ import annotations


class MosaicError(Exception):
    """Base class: something went wrong that the user can fix; exit code 1."""

    exit_code = 1


class UsageError(MosaicError):
    """Bad command-line usage or configuration; exit code 2."""

    exit_code = 2


class ConfigError(UsageError):
    """A worker config is invalid. The message names the field and the file."""

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None):
        where = ", ".join(p for p in (f"file {source}" if source else "", f"field {field!r}" if field else "") if p)
        super().__init__(f"{message} ({where})" if where else message)
        self.field, self.source = field, source


class PluginError(MosaicError):
    """A plugin failed to load, returned something invalid, or conflicts with another."""

    exit_code = 2
