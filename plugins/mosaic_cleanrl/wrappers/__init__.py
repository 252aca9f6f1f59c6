"""MOSAIC's documented wrapper modules of the CleanRL worker (:mod:`mosaic_cleanrl.wrappers.curriculum`)."""
