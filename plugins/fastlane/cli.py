"""``mosaic fastlane``: snapshot, watch, list and clean up FastLane segments.

    mosaic fastlane snapshot RUN_ID [-o frame.png] [--runs-dir D] [--timeout S] [--slot N] [--owner USER]
    mosaic fastlane watch RUN_ID [--port P] [--terminal] [--frames N] [--runs-dir D] [--owner USER]
    mosaic fastlane list [--owner USER]
    mosaic fastlane clean        # remove our segments whose host process is gone

Only segments of one user are read (yours unless ``--owner`` names another); links, FIFOs and
other users' files in the segment directory are reported as skipped, never opened through,
waited on or deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mosaic_core import CliCommand, MosaicError, UsageError
from mosaic_core.jsontext import dumps

if TYPE_CHECKING:
    from mosaic_fastlane.reader import FastLaneReader


def command() -> CliCommand:
    return CliCommand(
        name="fastlane", help="live frames of a run: snapshot, watch, list, clean", configure=configure, run=run
    )


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="fastlane_command", metavar="{snapshot,watch,list,clean}")
    snapshot = sub.add_parser("snapshot", help="save the current frame of a run as PNG")
    snapshot.add_argument("run_id", metavar="RUN_ID")
    snapshot.add_argument("-o", "--output", default="frame.png", help="PNG file to write (default frame.png)")
    snapshot.add_argument("--slot", type=int, default=None, help="grid mode: one tile instead of the whole grid")
    watch = sub.add_parser("watch", help="show a run's frames live (a page on 127.0.0.1, or --terminal)")
    watch.add_argument("run_id", metavar="RUN_ID")
    watch.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    watch.add_argument("--terminal", action="store_true", help="draw frames in this terminal instead")
    watch.add_argument("--frames", type=int, default=0, help="--terminal: stop after N frames (0 = until the run ends)")
    watch.add_argument("--columns", type=int, default=80, help="--terminal: width in characters")
    for command_parser in (snapshot, watch):
        command_parser.add_argument("--runs-dir", default=None, help="runs root (default var/trainer/runs)")
        command_parser.add_argument(
            "--timeout", type=float, default=10.0, help="seconds to wait for the first frame (default 10)"
        )
    listing = sub.add_parser("list", help="FastLane segments on this machine and whose they are")
    for command_parser in (snapshot, watch, listing):
        command_parser.add_argument(
            "--owner", default=None, metavar="USER", help="read segments of this user (name or uid; default: you)"
        )
    sub.add_parser("clean", help="remove your segments left behind by hosts that died")


def run(args: argparse.Namespace) -> int:
    command_name = getattr(args, "fastlane_command", None)
    if command_name == "snapshot":
        return snapshot(args)
    if command_name == "watch":
        from mosaic_fastlane.watch import watch

        return watch(args, open_reader(args.run_id, args.runs_dir, args.owner))
    if command_name == "list":
        return list_segments(args.owner)
    if command_name == "clean":
        return clean()
    raise UsageError("mosaic fastlane needs a subcommand: snapshot, watch, list or clean")


def owner_uid(owner: str | None) -> int:
    from mosaic_fastlane.trust import UntrustedFile, resolve_user

    try:
        return resolve_user(owner)
    except UntrustedFile as exc:
        raise UsageError(f"--owner: {exc}") from None


def open_reader(run_id: str, runs_dir: str | None, owner: str | None = None) -> FastLaneReader:
    """A reader of the run's segment, or an error that says why there is none."""
    from mosaic_core.toolkit import check_run_id
    from mosaic_fastlane.reader import FastLaneReader
    from mosaic_fastlane.segment import SegmentMissing

    check_run_id(run_id)
    uid = owner_uid(owner)
    try:
        return FastLaneReader(run_id, owner_uid=uid)
    except SegmentMissing:
        raise MosaicError(explain_missing(run_id, runs_dir)) from None


def explain_missing(run_id: str, runs_dir: str | None) -> str:
    from mosaic_core import STATUS_OF, RunDirectory
    from mosaic_core.toolkit import events_backwards
    from mosaic_fastlane.settings import is_enabled

    directory = RunDirectory.for_run(runs_dir, run_id)
    if not directory.path.is_dir():
        return f"no FastLane segment for run {run_id}, and no run {run_id} under {directory.root}"
    ended = next(events_backwards(directory.events, STATUS_OF), None)
    if ended is not None:
        return f"run {run_id} has ended ({STATUS_OF[ended['event']]}); its FastLane segment went with it"
    try:
        extras = json.loads(directory.config.read_text(encoding="utf-8")).get("extras") or {}
    except (OSError, ValueError):
        extras = {}
    if not is_enabled(extras):
        return (
            f"run {run_id} runs without FastLane; start runs with --extras '{{\"fastlane\": true}}' "
            "(or a fastlane_video_mode)"
        )
    return f"run {run_id} has no FastLane segment (still starting, or shared memory failed: see {directory.logs})"


def snapshot(args: argparse.Namespace) -> int:
    from mosaic_core.files import check_output, write_atomic
    from mosaic_fastlane.frames import encode_png

    check_output(args.output, "-o")  # before waiting for a frame
    with open_reader(args.run_id, args.runs_dir, args.owner) as reader:
        if args.slot is not None and not 0 <= args.slot < reader.header.slot_count:
            raise UsageError(f"--slot {args.slot}: run {args.run_id} has slots 0..{reader.header.slot_count - 1}")
        frame = reader.wait(timeout=args.timeout)
        if frame is not None and args.slot is not None:
            frame = reader.read_slot(args.slot)
        if frame is None:
            raise MosaicError(f"run {args.run_id} published no frame within {args.timeout:g} s")
    output = Path(args.output)
    write_atomic(output, encode_png(frame.pixels), flag="-o")
    print(dumps({"run_id": args.run_id, "path": str(output), **frame.metrics()}))
    return 0


def _segments() -> list[Path]:
    from mosaic_fastlane import layout

    try:
        return sorted(p for p in layout.shm_dir().iterdir() if p.name.startswith(layout.NAME_PREFIX))
    except OSError:
        return []


def list_segments(owner: str | None = None) -> int:
    """One JSON line per segment: its run and host, or why it was skipped (never opened through)."""
    from mosaic_fastlane.segment import FastLaneError, UntrustedSegment, open_segment, slot_status

    uid = owner_uid(owner)
    for path in _segments():
        try:
            mapping = open_segment(name=path.name, directory=path.parent, owner_uid=uid)
        except UntrustedSegment as exc:
            print(json.dumps({"segment": path.name, "skipped": str(exc)}))
            continue
        except FastLaneError as exc:
            print(json.dumps({"segment": path.name, "error": str(exc)}))
            continue
        header = mapping.header
        slots = slot_status(mapping)
        mapping.close()
        print(
            json.dumps(
                {
                    "segment": path.name,
                    "run_id": header.run_id,
                    "mode": header.mode.name.lower(),
                    "host_pid": header.owner_pid,
                    "host_alive": header.owner_alive,
                    "frames_published": sum(s["published"] for s in slots),
                    "slots": len(slots),
                }
            )
        )
    return 0


def clean() -> int:
    """Remove our segments whose host died (SIGKILL of the host itself); live runs are untouched.

    Only our own regular files are ever removed; anything else (another user's file, a link,
    a FIFO, a file that is not a segment) is reported on stderr as skipped.
    """
    from mosaic_fastlane.segment import FastLaneError, open_segment, unlink_if_same

    removed = skipped = 0
    for path in _segments():
        try:
            mapping = open_segment(name=path.name, directory=path.parent)
        except FastLaneError as exc:
            skipped += 1
            print(f"skipped {path}: {exc}", file=sys.stderr)
            continue
        alive, identity = mapping.header.owner_alive, mapping.identity
        mapping.close()
        if not alive and unlink_if_same(path, identity):
            removed += 1
            print(f"removed {path}", file=sys.stderr)
    for path, why in _half_made():
        if why:
            skipped += 1
            print(f"skipped {path}: {why}", file=sys.stderr)
        else:
            path.unlink(missing_ok=True)
            removed += 1
            print(f"removed {path}", file=sys.stderr)
    print(json.dumps({"removed": removed, "skipped": skipped}))
    return 0


def _half_made() -> list[tuple[Path, str | None]]:
    """Segments a host was still building when it died (``.mosaic-fl-<run>.<pid>.<random>.tmp``),
    each with the reason it must be left alone (None: ours, a regular file, its creator is gone)."""
    from mosaic_fastlane import layout
    from mosaic_fastlane.trust import kind_of, temp_pid, user_name

    found: list[tuple[Path, str | None]] = []
    try:
        candidates = list(layout.shm_dir().glob(f".{layout.NAME_PREFIX}*.tmp"))
    except OSError:
        return []
    me = os.geteuid()
    for path in candidates:
        pid = temp_pid(path.name)
        if pid is None or layout.process_alive(pid):
            continue
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if info.st_uid != me:
            found.append((path, f"owned by {user_name(info.st_uid)}, not by {user_name(me)}"))
        elif not stat.S_ISREG(info.st_mode):
            found.append((path, f"{kind_of(info.st_mode)}, not a regular file"))
        else:
            found.append((path, None))
    return found
