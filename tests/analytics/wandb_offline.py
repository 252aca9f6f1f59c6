"""Reading what W&B wrote offline (``RUN_DIR/wandb/offline-run-<time>-<id>/run-<id>.wandb``), with
no network and no W&B server: the file is a LevelDB-style log (a 7-byte header, ``:W&B``, then
32 KiB blocks of records, each a 7-byte header — CRC, length, type — and a piece of one
``wandb_internal_pb2.Record``). wandb 0.31's Python package no longer ships a reader
(``wandb.sdk.internal.datastore`` went with the Go core), so the tests read it here."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    """Every record of a ``.wandb`` file, parsed (``wandb_internal_pb2.Record``)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B log"
    found, pieces, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        body, pos = data[pos + HEADER : pos + HEADER + length], pos + HEADER + length
        if kind == 0 and length == 0:  # zeros: the end of what was written
            break
        if kind in (FULL, FIRST):
            pieces = body
        elif kind in (MIDDLE, LAST):
            pieces += body
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            found.append(record)
    return found


def offline_runs(run_dir: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(W&B run id, history rows as {key: value}) of each offline W&B run in ``run_dir``, oldest first."""
    import json

    runs = []
    for folder in sorted((run_dir / "wandb").glob("offline-run-*"), key=lambda p: p.name.rsplit("-", 2)[-2]):
        (log,) = folder.glob("run-*.wandb")
        run_id, rows = None, []
        for record in records(log):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run_id = record.run.run_id
            elif kind == "history":
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
        runs.append((run_id, rows))
    return runs
