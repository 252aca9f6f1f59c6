"""MOSAIC sweeps: hyperparameter searches and multi-seed benchmarks with Optuna (``mosaic sweep``)."""
