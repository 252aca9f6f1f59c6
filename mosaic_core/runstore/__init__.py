"""Runs kept on disk: their summaries, the index behind every listing, export, import and removal."""

__all__ = [
    "archive",
    "artifacts",
    "bands",
    "follow",
    "groups",
    "index",
    "score",
    "summary",
    "table",
    "trust",
    "unpack",
]  # its modules, each with an __all__ of its own
