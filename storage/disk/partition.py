"""A partition on disk: a chain of partitionlets and its manifest.

The chain manifest (`chain.json` in the partition's directory on the first
volume) lists the partitionlets in order with the volume each lives on, the
log start offset, the high watermark and the leader-epoch history. It is
replaced atomically. For the active (last, unsealed) partitionlet it also
records a checkpoint: a size up to which the log was fsynced and checked.
On load, a log longer than its checkpoint (the process died after writing
more) is validated batch by batch from the checkpoint and cut after the
last valid batch.

Appends write in the event loop (page cache); fsyncs run in worker threads
through a group commit, so waiting for durability never stalls the loop or
other partitions.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from .. import batch_format as bf
from ..api import AppendResult, FsyncPolicy, PartitionletInfo, TimestampHit
from ..errors import OffsetOutOfRangeError, StorageError, StorageFullError
from ..namespace import Settings, TopicState, now_ms
from ..partition_base import PartitionBase
from . import layout
from .files import FULL_ERRNOS, fsync_path, move_to_trash, new_file, unlink_files, write_atomic
from .partitionlet import Partitionlet
from .sync import GroupCommit
from .volumes import pick_volume

T = TypeVar("T")

if TYPE_CHECKING:
    from .store import DiskStore

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1


class DiskPartition(PartitionBase):
    def __init__(self, store: DiskStore, topic: TopicState, index: int) -> None:
        super().__init__(f"{topic.stream.path}:{topic.name}/{index}", store.epoch, store.record_timestamps)
        self._store = store
        self._topic = topic
        self._index = index
        self._manifest_path = os.path.join(self._dir_on(store.volumes[0].path), layout.MANIFEST_FILE)
        self._chain: list[Partitionlet] = []
        self._bases: list[int] = []
        self._checkpoint = 0  # size of the active partitionlet the manifest vouches for
        self._manifest_stale = False
        self._lock = asyncio.Lock()
        self._commit = GroupCommit(self._fsync_active)
        self._load()
        self._commit.synced = self._commit.written = self._hw
        if self._note_epoch(store.epoch, self._hw):
            self._manifest_stale = True

    def _dir_on(self, volume: str) -> str:
        return layout.partition_dir(volume, self._topic.stream.path, self._topic.name, self._index)

    # loading -----------------------------------------------------------------

    def _load(self) -> None:
        try:
            with open(self._manifest_path, "rb") as f:
                manifest = json.loads(f.read())
        except FileNotFoundError:
            return
        except ValueError as exc:  # written atomically, so only outside damage gets here
            raise StorageError(f"{self.name}: chain manifest {self._manifest_path} is unreadable: {exc}") from exc
        if manifest.get("topic_id") != self._topic.id_hex:
            log.warning("%s: data of an older topic of the same name found; discarding it", self.name)
            for volume in self._store.volumes:
                move_to_trash(self._dir_on(volume.path), layout.trash_dir(volume.path))
            return
        self._log_start = manifest["log_start"]
        self._hw = manifest["next"]
        self._epochs = [(e, o) for e, o in manifest["epochs"]]
        for rec in manifest["partitionlets"]:
            volume = self._store.volume(rec["volume"])
            self._chain.append(Partitionlet(
                self._dir_on(volume.path), volume, rec["base"], self._store.handles, sealed=rec["sealed"],
                next_offset=rec["next"], size=rec["size"], max_ts=rec["max_ts"],
                max_ts_offset=rec["max_ts_offset"], created_ms=rec["created_ms"],
                generation=rec.get("generation", 0), clean_to=rec.get("clean_to"),
                cleaned_ms=rec.get("cleaned_ms", 0), tombstones=rec.get("tombstones", 0),
            ))
        self._bases = [p.base for p in self._chain]
        if not self._store.clean:
            self._remove_orphans()
        active = self._active()
        if active is not None:
            self._checkpoint = active.size
            self._recover(active)
            self._hw = active.next_offset

    def _remove_orphans(self) -> None:
        """Delete partitionlet files the manifest does not list.

        A crash between writing the manifest and unlinking what it dropped
        (retention, DeleteRecords, the log cleaner's swap) or while rolling or
        cleaning leaves such files.
        """
        listed = {path for p in self._chain for path in p.paths()}
        for volume in self._store.volumes:
            directory = self._dir_on(volume.path)
            try:
                names = os.listdir(directory)
            except FileNotFoundError:
                continue
            for name in names:
                if not layout.is_partitionlet_file(name):
                    continue
                path = os.path.join(directory, name)
                if path not in listed:
                    if name.endswith(layout.LOG_SUFFIX):
                        volume.release(os.path.getsize(path))
                    log.warning("%s: removing %s, which its manifest does not list", self.name, path)
                    os.unlink(path)

    def _recover(self, active: Partitionlet) -> None:
        """Validate what was written after the checkpoint; keep only whole, intact batches."""
        try:
            file_size = os.stat(active.log_path).st_size
        except FileNotFoundError:
            log.error("%s: log file %s is missing; starting it empty", self.name, active.log_path)
            new_file(active.log_path)
            active.start_empty()
            file_size = 0
        if file_size == self._checkpoint and self._store.clean:
            return
        start, expected = (self._checkpoint, active.next_offset) if file_size >= self._checkpoint else (0, active.base)
        if start == 0:
            active.size, active.max_ts = 0, -1
        for epoch, base in active.recover(start, expected):
            if self._note_epoch(epoch, base):
                self._manifest_stale = True
        if active.size != self._checkpoint:
            self._manifest_stale = True
            log.info("%s: recovered to offset %d (%d bytes)", self.name, active.next_offset, active.size)

    def _active(self) -> Partitionlet | None:
        if self._chain and not self._chain[-1].sealed:
            return self._chain[-1]
        return None

    # manifest ----------------------------------------------------------------

    def _manifest(self) -> bytes:
        return json.dumps({
            "version": MANIFEST_VERSION,
            "topic_id": self._topic.id_hex,
            "log_start": self._log_start,
            "next": self._hw,
            "epochs": self._epochs,
            "partitionlets": [p.info() for p in self._chain],
        }).encode()

    async def _save(self) -> None:
        """Checkpoint the active log and replace the manifest (caller holds the lock)."""
        active = self._active()
        indexes = active.index_bytes() if active is not None else None
        data = self._manifest()

        def work() -> None:
            if active is not None:
                fsync_path(active.log_path)
                active.write_index_files(*indexes)
            os.makedirs(os.path.dirname(self._manifest_path), exist_ok=True)
            write_atomic(self._manifest_path, data, on_full=self._store.volumes[0].release_ballast)

        await asyncio.to_thread(work)
        self._checkpoint = active.size if active is not None else 0
        self._manifest_stale = False

    async def _critical(self, section: Callable[[], Awaitable[T]]) -> T:
        """Run `section` under the lock to its end, even if the caller is cancelled.

        A broker stopping or dropping a connection cancels the request that
        is appending; a roll or manifest write cut in half (its thread keeps
        running anyway) would leave the chain inconsistent and race the next
        writer. The section runs as a task of its own that keeps the lock
        until it is done.
        """

        async def locked() -> T:
            async with self._lock:
                return await section()

        return await asyncio.shield(asyncio.ensure_future(locked()))

    async def checkpoint(self) -> None:
        """Persist state (called on close): no scan will be needed on the next open."""

        async def section() -> None:
            await self._commit.drain()
            active = self._active()
            dirty = active is not None and active.size != self._checkpoint
            if (dirty or self._manifest_stale) and (self._chain or os.path.exists(self._manifest_path)):
                await self._save()

        await self._critical(section)

    # appending ---------------------------------------------------------------

    async def append(self, batch: bytes | bytearray | memoryview, record_count: int) -> AppendResult:
        self._check_open()
        view = memoryview(batch).cast("B")
        length, max_ts = bf.check_append(view, record_count)
        settings = self._topic.settings
        now = now_ms()
        if self._lock.locked() or self._needs_roll(len(view), settings.partitionlet_bytes,
                                                   settings.partitionlet_age_ms, now):

            async def section() -> int:
                self._check_open()
                if self._needs_roll(len(view), settings.partitionlet_bytes, settings.partitionlet_age_ms, now):
                    await self._roll(len(view))
                return self._write(view, length, max_ts, record_count)

            base = await self._critical(section)
        else:
            base = self._write(view, length, max_ts, record_count)
        if settings.fsync is FsyncPolicy.ALWAYS:
            self._commit.start()
        elif settings.fsync is FsyncPolicy.INTERVAL:
            self._commit.start_later(settings.fsync_interval_ms / 1000)
        if self._waiters:
            self._wake()
        return AppendResult(base, base + record_count - 1, now)

    def _needs_roll(self, size: int, max_bytes: int, max_age_ms: int, now: int) -> bool:
        active = self._active()
        if active is None:
            return True
        volume = active.volume
        if volume.limit is not None and volume.used + size > volume.limit:
            return True  # try another volume
        if active.size == 0:
            return False
        return active.size + size > max_bytes or now - active.created_ms >= max_age_ms

    def _write(self, view: memoryview, length: int, max_ts: int, record_count: int) -> int:
        """Write one batch at the high watermark; returns its base offset."""
        active = self._chain[-1]
        base = self._hw
        size = len(view)
        active.volume.reserve(size)
        try:
            active.append(bf.PREFIX.pack(base, length, self._leader_epoch), view[bf.PREFIX_SIZE:], base,
                          base + record_count, max_ts)
        except OSError as exc:
            active.volume.release(size)
            if exc.errno in FULL_ERRNOS:
                raise StorageFullError(f"{self.name}: volume {active.volume.path} is full: {exc.strerror}") from exc
            raise
        self._hw = base + record_count
        self._commit.wrote(self._hw)
        return base

    async def _roll(self, size: int) -> None:
        """Seal the active partitionlet and start a new one on the emptiest volume."""
        volume = pick_volume(self._store.volumes, size)  # StorageFullError before anything changes
        old = self._active()
        dropped: list[str] = []
        if old is not None and old.size == 0:
            self._chain.pop()
            old.close_file()
            dropped = old.paths()
        elif old is not None:
            old.sealed = True
            indexes = old.index_bytes()

            def seal() -> None:
                fsync_path(old.log_path)
                old.write_index_files(*indexes)

            await asyncio.to_thread(seal)
            old.close_file()
        new = Partitionlet(self._dir_on(volume.path), volume, self._hw, self._store.handles, sealed=False,
                           next_offset=self._hw, size=0, max_ts=-1, max_ts_offset=self._hw, created_ms=now_ms())
        await asyncio.to_thread(new_file, new.log_path)
        new.start_empty()
        self._chain.append(new)
        self._bases = [p.base for p in self._chain]
        await self._save()
        if dropped:
            await asyncio.to_thread(unlink_files, dropped)

    def _fsync_active(self) -> None:
        active = self._active()
        if active is not None:
            fsync_path(active.log_path)

    async def wait_durable(self, offset: int) -> None:
        if self._topic.settings.fsync is FsyncPolicy.NONE:
            return
        await self._commit.wait(min(offset, self._hw))

    # reading -----------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start or offset > self._hw:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self._log_start}, {self._hw}] of {self.name}")

    def _holding(self, offset: int) -> int:
        """The chain index of the partitionlet whose offsets cover `offset`."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while self._chain[i].next_offset <= offset:  # skip a gap left by a damaged partitionlet
            i += 1
        return i

    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """As the interface says; a read ends at the end of a partitionlet (one pread)."""
        self._check_open()
        self._check_offset(offset)
        if offset == self._hw:
            return b""
        i = self._holding(offset)
        while True:  # past partitionlets the log cleaner emptied from `offset` on
            part = self._chain[i]
            data = part.read(max(offset, part.base), max_bytes)
            if data or i == len(self._chain) - 1:
                return data
            i += 1

    def _live(self) -> list[Partitionlet]:
        return [p for p in self._chain if p.next_offset > self._log_start and p.size > 0]

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        self._check_open()
        for p in self._live():
            if p.max_ts < timestamp:
                continue
            for pos, base, size, last, max_ts, attrs in p.candidates(timestamp, self._log_start):
                hit = self._first_at_or_after(p.batch(pos, size), base, last, max_ts,
                                              bool(attrs & bf.ATTR_LOG_APPEND_TIME), timestamp, self._log_start)
                if hit is not None:
                    return hit
        return None

    async def max_timestamp(self) -> TimestampHit | None:
        self._check_open()
        live = self._live()
        if not live:
            return None
        best = max(live, key=lambda p: p.max_ts)  # max() keeps the first of equals
        if best.max_ts_offset >= self._log_start:
            target = best.max_ts_offset
            pos, size = best.locate(target)
            span = next(best.walk(pos, pos + size))
        else:  # the batch holding the max is below the log start: find the live max
            span = None
            for cand in best.batches_from(self._log_start):
                if span is None or cand[4] > span[4]:
                    span = cand
        pos, base, size, last, max_ts, attrs = span
        return self._offset_of_max(best.batch(pos, size), base, last, max_ts,
                                   bool(attrs & bf.ATTR_LOG_APPEND_TIME), self._log_start)

    async def partitionlets(self) -> list[PartitionletInfo]:
        return [PartitionletInfo(p.base, p.next_offset, p.size, p.volume.path, p.sealed, p.max_ts)
                for p in self._chain]

    # removing ----------------------------------------------------------------

    async def delete_records(self, before_offset: int) -> int:
        self._check_open()
        if before_offset == -1:
            before_offset = self._hw
        if not 0 <= before_offset <= self._hw:
            raise OffsetOutOfRangeError(f"cannot delete records below {before_offset}: {self.name} ends at {self._hw}")
        if before_offset <= self._log_start:
            return self._log_start
        async def section() -> None:
            if before_offset > self._log_start:
                drop = 0
                while drop < len(self._chain) and self._chain[drop].next_offset <= before_offset:
                    drop += 1
                await self._drop(drop, before_offset)

        await self._critical(section)
        return self._log_start

    async def purge(self) -> None:
        """Drop every message; offsets continue from the high watermark."""
        await self.delete_records(self._hw)

    async def enforce_retention(self, now: int) -> int:
        """Delete whole partitionlets past the ttl or the size cap; returns how many."""
        self._check_open()
        settings = self._topic.settings
        if not settings.retains:
            return 0
        return await self._critical(lambda: self._retain(settings, now))

    async def _retain(self, settings: Settings, now: int) -> int:
        """The body of enforce_retention (lock held)."""
        chain = self._chain
        drop = 0
        if settings.ttl_ms > 0:
            cutoff = now - settings.ttl_ms
            while drop < len(chain) and (chain[drop].size > 0 or chain[drop].sealed) and (
                chain[drop].max_ts if chain[drop].max_ts >= 0 else chain[drop].created_ms
            ) < cutoff:
                drop += 1
        if settings.retention_bytes >= 0:
            total = sum(p.size for p in chain[drop:])
            while drop < len(chain) - 1 and total - chain[drop].size >= settings.retention_bytes:
                total -= chain[drop].size
                drop += 1
        if drop == 0:
            return 0
        start = chain[drop].base if drop < len(chain) else self._hw
        await self._drop(drop, max(start, self._log_start))
        return drop

    async def _drop(self, count: int, log_start: int) -> None:
        """Remove the first `count` partitionlets and move the log start (lock held)."""
        gone = self._chain[:count]
        self._log_start = log_start
        del self._chain[:count]
        self._bases = [p.base for p in self._chain]
        self._drop_epochs_before(log_start)
        for p in gone:
            p.close_file()
            p.volume.release(p.size)
        await self._save()
        paths = [path for p in gone for path in p.paths()]
        if paths:
            await asyncio.to_thread(unlink_files, paths)
            await asyncio.to_thread(self._store.volumes[0].restore_ballast)
            log.info("%s: deleted %d partitionlet(s); log starts at %d", self.name, len(gone), log_start)

    # log compaction ----------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._topic.settings

    def chain_tail(self, first: Partitionlet) -> list[Partitionlet]:
        """The partitionlets from `first` to the active one."""
        return self._chain[self._chain.index(first):]

    def sealed_chain(self) -> list[Partitionlet]:
        """The live sealed partitionlets, oldest first: all the log cleaner may rewrite."""
        return [p for p in self._chain if p.sealed and p.next_offset > self._log_start]

    async def replace_partitionlets(self, cleaned: list[tuple[Partitionlet, Partitionlet]]) -> int:
        """Swap cleaned partitionlets into the chain: (old, new) pairs, same base and offsets.

        The new files are complete and fsynced; one atomic manifest write
        makes the swap, then the old files go. A pair whose old partitionlet
        left the chain meanwhile (retention, DeleteRecords, topic deleted)
        is skipped and its new files removed. Returns how many were swapped.
        """

        async def section() -> int:
            swapped, stale = [], []
            for old, new in cleaned:
                if not self._closed and old in self._chain:
                    self._chain[self._chain.index(old)] = new
                    swapped.append((old, new))
                else:
                    stale.append(new)
            if swapped:
                self._bases = [p.base for p in self._chain]
                await self._save()
            for old, new in swapped:
                old.close_file()
                old.volume.release(old.size)
                new.volume.reserve(new.size)
            paths = [path for old, _ in swapped for path in old.paths()] + [
                path for new in stale for path in new.paths()]
            if paths:
                await asyncio.to_thread(unlink_files, paths)
            return len(swapped)

        return await self._critical(section)

    def close(self) -> None:
        """The topic is gone: release files and pollers."""
        self._commit.cancel()
        for p in self._chain:
            p.close_file()
        self._mark_closed()

