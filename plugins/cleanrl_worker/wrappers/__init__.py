"""MOSAIC's documented wrapper modules of the CleanRL worker (:mod:`cleanrl_worker.wrappers.curriculum`)."""
