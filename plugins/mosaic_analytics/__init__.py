"""MOSAIC analytics plugin."""
