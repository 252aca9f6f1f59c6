"""MOSAIC experiments: grids of (worker, algo, env, overrides) × seeds (``mosaic experiment``) and
their comparison by IQM, median, mean and optimality gap with stratified bootstrap CIs (``mosaic compare``)."""
