"""MOSAIC host: discovers workers and plugins, validates configs, runs and supervises jobs."""

__version__ = "0.1.0"
