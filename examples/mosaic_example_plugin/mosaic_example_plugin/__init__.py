"""An example third-party MOSAIC package."""
