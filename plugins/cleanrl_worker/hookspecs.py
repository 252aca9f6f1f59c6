"""The hook the CleanRL worker declares (through its plugin's ``mosaic_hookspecs``): a package
adds CleanRL-style algorithms by implementing it in a module its ``mosaic.plugins`` entry
point names. Implement it with ``@hookimpl(optionalhook=True)``, so the package loads whether or
not the CleanRL worker is installed (or disabled)."""

from __future__ import annotations

from mosaic_core import ISOLATE, hookspec


@hookspec(ISOLATE)
def mosaic_cleanrl_algorithms() -> dict[str, str] | None:
    """Algorithms for ``mosaic run --worker cleanrl --algo NAME``: a mapping of names to
    ``"pkg.module"`` (that module's file is the script, found without importing it) or
    ``"pkg.module:function"`` (a function returning the script's path).

    Looked up after a script path and before a CleanRL checkout, an installed ``cleanrl`` and the
    bundled scripts (``mosaic algos`` shows where each name comes from). One name from two
    plugins is an error naming both. Failure: isolate (that plugin's algorithms are missing).

    **Example:**

    .. code-block:: python

        @hookimpl(optionalhook=True)
        def mosaic_cleanrl_algorithms():
            return {"my_ppo": "my_pkg.my_ppo"}
    """
