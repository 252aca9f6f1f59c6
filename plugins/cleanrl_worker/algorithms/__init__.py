"""Bundled CleanRL-compatible algorithms: one file each, runnable as scripts."""
