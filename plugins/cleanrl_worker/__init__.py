"""The CleanRL worker: runs CleanRL single-file algorithms, unmodified, under supervision."""

__version__ = "0.1.0"
