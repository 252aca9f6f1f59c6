"""Old spellings a user may still type (a CLI flag, a config or spec key): each keeps working and
says, in one line on stderr, the name that replaced it (docs/glossary.md says why)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def say_renamed(old: str, new: str, where: str | None = None) -> None:
    """One line on stderr: ``old`` (in ``where``) is deprecated, ``new`` replaces it."""
    place = f" in {where}" if where else ""
    print(f"mosaic: {old}{place} is deprecated; use {new}", file=sys.stderr, flush=True)


class _RenamedFlag(argparse.Action):
    """Stores into the new flag's destination and says the new flag's name."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        say_renamed(option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, values)


def add_renamed_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str, **kwargs: Any
) -> None:
    """``old`` as a hidden alias of the flag ``new``: the same destination (argparse's, from
    ``new``'s name); give the same ``type``. Using it says ``new``'s name."""
    dest = new.lstrip("-").replace("-", "_")
    parser.add_argument(old, dest=dest, action=_RenamedFlag, new=new, help=argparse.SUPPRESS, **kwargs)
