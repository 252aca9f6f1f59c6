"""A run's stages, in the order a run goes through them; :mod:`mosaic_core.pipeline` calls them.

- :mod:`~mosaic_core.stages.flags`: the command line (the host's flags, their checks);
- :mod:`~mosaic_core.stages.resolve`: what the run is asked to be (flags, a config file, ``--from``,
  an existing run) and its config, defaults included (:class:`~mosaic_core.stages.resolve.Request`
  in, :class:`~mosaic_core.stages.resolve.Resolved` out);
- :mod:`~mosaic_core.stages.validate`: the host's, the plugins' and the worker's checks
  (:class:`~mosaic_core.stages.validate.Validated` out);
- :mod:`~mosaic_core.stages.plan`: the run directory, a resume, the worker's plan, the child's
  environment (:class:`~mosaic_core.stages.plan.Prepared` out: what a dry run shows);
- :mod:`~mosaic_core.stages.trust`: the code a run would execute, held to a daemon's policy and
  refused from an imported, untrusted run;
- :mod:`~mosaic_core.stages.launch`: the run's files, then the launcher;
- :mod:`~mosaic_core.stages.follow`: how the host follows it (heartbeats, a daemon's session).

Each stage takes the previous stage's frozen result; nothing here starts a process before
:func:`~mosaic_core.stages.launch.execute`.
"""
