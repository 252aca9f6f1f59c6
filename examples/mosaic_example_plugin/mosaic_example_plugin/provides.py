"""What the example package provides besides its plugin's hooks, registered the one way: a
module its ``mosaic.plugins`` entry point (``example-provides``) names, whose hooks return
descriptors: two workers (``mosaic_workers``) and a CleanRL algorithm (the CleanRL worker's own
hook, ``mosaic_cleanrl_algorithms``; ``optionalhook``: the package loads without that worker)."""

from mosaic_core import hookimpl


@hookimpl
def mosaic_workers():
    from mosaic_example_plugin.worker import get_isolated_worker_metadata, get_worker_metadata

    return [get_worker_metadata(), get_isolated_worker_metadata()]


@hookimpl(optionalhook=True)
def mosaic_cleanrl_algorithms():
    return {"example_random": "mosaic_example_plugin.random_agent"}
