"""Runs kept on disk: their summaries, the index behind every listing, export, import and removal."""
