"""MOSAIC curriculum plugin."""
