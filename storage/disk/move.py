"""Moving a partition's partitionlets to its home volume (Kafka's AlterReplicaLogDirs).

A partition may be given a home volume: its new partitionlets start there
instead of on the emptiest volume, and the ones it already has elsewhere are
moved there in the background, one at a time, while it is read and appended
to as usual:

1. copy: the sealed partitionlet's files are copied to the partition's
   directory on the home volume and fsynced (in a worker thread, on file
   descriptors of its own);
2. swap: one atomic chain-manifest write lists the copy instead of the
   original (the log cleaner's swap, DiskPartition.replace_partitionlets);
3. the original's files are unlinked.

Killed anywhere, the store comes back with one complete copy listed: before
the manifest write the original is, and the copy is an unlisted file of a
listed partitionlet, removed on the next open as a cleaner's leftover
generation is; after it, the copy is, and the original is the leftover. The
active partitionlet is never copied: giving a partition its home rolls it,
so the next one starts at home. The home is kept in the manifest, so a move
cut short by a restart resumes when the partition is next opened (the
background check opens every partition holding data after a start).

The copy keeps to the store's move_bytes_per_second when one is set (Kafka's
replica.alter.log.dirs.io.max.bytes.per.second), read at every chunk so a
change applies to a move under way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..errors import StorageError, StorageFullError
from .files import FULL_ERRNOS, fsync_dir, make_dirs, unlink_files
from .partitionlet import Partitionlet
from .volumes import Volume

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_PAUSED_RECHECK_S = 0.1  # how often a move held by a throttle of 0 looks at the throttle again


class MoveStopped(Exception):
    """The partition was closed or the store is stopping: the copy was abandoned and removed."""


def crash_point(name: str) -> None:
    """Called where a killed move would leave work half done; tests stop the process here."""


Rate = Callable[[], int | None]  # bytes per second a copy may go at now (None: no limit; 0: hold)


def copy_partitionlet(p: Partitionlet, directory: str, volume: Volume, stop: threading.Event,
                      rate: Rate = lambda: None) -> Partitionlet:
    """Copy a sealed partitionlet's files into `directory` on `volume`, fsynced (blocking), at most `rate()` B/s.

    Returns the copy, not yet in the chain. Stopped or failed, the copy's
    files are removed (and the directories made for them, when left empty)
    before the exception propagates: a full disk raises StorageFullError.
    """
    new = Partitionlet(directory, volume, p.base, p.handles, sealed=True, next_offset=p.next_offset, size=p.size,
                       max_ts=p.max_ts, max_ts_offset=p.max_ts_offset, created_ms=p.created_ms,
                       generation=p.generation, clean_to=p.clean_to, cleaned_ms=p.cleaned_ms,
                       tombstones=p.tombstones)
    for hole in p.holes:
        new.add_hole(*hole)
    new.missing = p.missing
    try:
        make_dirs(directory)
        for source, target in zip(p.paths(), new.paths()):
            if stop.is_set():
                raise MoveStopped(p.log_path)
            try:
                _copy_file(source, target, stop, rate)
            except FileNotFoundError:
                if source == p.log_path and not p.missing:
                    raise  # the log itself vanished (retention or a cleaning swapped it out meanwhile)
                # a missing index is rebuilt from the log, as for the original
        fsync_dir(directory)
    except BaseException as exc:
        unlink_files(new.paths())
        for path in (directory, os.path.dirname(directory)):
            try:
                os.rmdir(path)  # only if empty: a topic deleted meanwhile must not reappear
            except OSError:
                break
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            raise StorageFullError(f"no room on {volume.path} to move {p.log_path}: {exc.strerror}") from exc
        raise
    return new


def _copy_file(source: str, target: str, stop: threading.Event, rate: Rate) -> None:
    src = os.open(source, os.O_RDONLY)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pos = 0
            while True:
                if stop.is_set():
                    raise MoveStopped(source)
                started, limit = time.monotonic(), rate()
                if limit == 0:  # a throttle of 0 holds the move (as Kafka's quota of 0 does) until it changes
                    if stop.wait(_PAUSED_RECHECK_S):
                        raise MoveStopped(source)
                    continue
                chunk = os.pread(src, _CHUNK if limit is None else min(max(limit // 10, 4096), _CHUNK), pos)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
                pos += len(chunk)
                if limit is not None and stop.wait(len(chunk) / limit - (time.monotonic() - started)):
                    raise MoveStopped(source)
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)



class MovablePartition(Protocol):
    """What moving partitionlets home needs of a partition (DiskPartition provides it)."""

    name: str
    move_stop: threading.Event

    @property
    def home(self) -> Volume | None: ...

    @property
    def move_stopping(self) -> bool: ...

    @property
    def move_rate(self) -> int | None: ...

    def dir_on(self, volume: str) -> str: ...

    def away_from_home(self) -> list[Partitionlet]: ...

    async def settled_away_from_home(self) -> list[Partitionlet]: ...

    async def replace_partitionlets(self, cleaned: list[tuple[Partitionlet, Partitionlet]], *,
                                    reserved: bool = False) -> int: ...


async def move_home(part: MovablePartition) -> int:
    """Move the partition's sealed partitionlets that are away from its home volume there; returns how many.

    Stops early (logged) when the home volume has no room or a file cannot
    be read or written; the home stays, and the next AlterReplicaLogDirs or
    open of the partition tries again.
    """
    moved = 0
    while True:
        home = part.home
        away = await part.settled_away_from_home()
        if home is None or not away or part.move_stopping:
            return moved
        p = away[0]
        try:
            if home.free_bytes() < p.size:
                raise StorageFullError(f"{home.path} has {home.free_bytes()} bytes free, {p.size} needed")
            home.reserve(p.size)
        except StorageFullError as exc:
            log.error("%s: cannot move %s to %s: %s", part.name, p.log_path, home.path, exc)
            return moved
        try:
            new = await asyncio.to_thread(copy_partitionlet, p, part.dir_on(home.path), home, part.move_stop,
                                          part.move_rate)
        except MoveStopped:
            home.release(p.size)
            return moved
        except (OSError, StorageError) as exc:
            home.release(p.size)
            if isinstance(exc, FileNotFoundError) and p not in part.away_from_home():
                continue  # retention, DeleteRecords or the cleaner took it out of the chain meanwhile
            log.error("%s: cannot move %s to %s: %s", part.name, p.log_path, home.path, exc)
            return moved
        crash_point("copied")
        moved += await part.replace_partitionlets([(p, new)], reserved=True)
