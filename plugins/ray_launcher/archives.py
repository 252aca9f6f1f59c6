"""Run-directory snapshots between the caller and a node, unpacked with PEP 706's ``data`` filter (no
links, devices or special modes, nothing outside the destination). The standard library has the filter
from Python 3.11.4; on 3.11.0-3.11.3 (Debian 12's python3.11 is 3.11.2) its backport does, which the
``ray`` extra installs there."""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path

FILTERED = "tarfile" if sys.version_info >= (3, 11, 4) else "backports.tarfile"


def unpack(archive: bytes, destination: Path) -> None:
    """A gzip'd tar archive's files into ``destination``."""
    with importlib.import_module(FILTERED).open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(destination, filter="data")
