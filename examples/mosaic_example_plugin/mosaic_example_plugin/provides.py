"""What the example package provides besides its plugin's hooks: a CleanRL algorithm (the CleanRL
worker's own hook, ``mosaic_cleanrl_algorithms``; ``optionalhook``: the package loads without that
worker). Its two workers register through ``mosaic.workers`` (``pyproject.toml``)."""

from mosaic_core import hookimpl


@hookimpl(optionalhook=True)
def mosaic_cleanrl_algorithms():
    return {"example_random": "mosaic_example_plugin.random_agent"}
