"""Test helpers a worker's own tests use: the worker contract suite (:mod:`mosaic_core.testing.contract_suite`)."""
