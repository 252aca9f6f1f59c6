"""The ``mosaic`` command line."""
