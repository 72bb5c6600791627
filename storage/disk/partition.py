"""A partition on disk: a chain of partitionlets and its manifest.

The chain manifest (`chain.json` in the partition's directory on the first
volume) lists the partitionlets in order with the volume each lives on, the
log start offset, the high watermark and the leader-epoch history. It is
replaced atomically. For the active (last, unsealed) partitionlet it also
records a checkpoint: a size up to which the log was fsynced and checked.
On load, a log longer than its checkpoint (the process died after writing
more) is validated batch by batch from the checkpoint and a torn tail cut
after the last valid batch; the last TAIL_CHECK_BYTES are checked on every
open, so damage after a clean shutdown is caught too (chain_load.py does
all that on open).

The manifest is not the only record of the chain: when it is missing,
garbled, names an unknown volume or is older than the files, the chain is
rebuilt from the partitionlet files (see chain.py). Damaged batches become
quarantined holes (see partitionlet.py); the high watermark never falls
below an offset the manifest or the files vouch for, so no offset is
handed out twice.

Nor after an unclean stop that also lost the log's tail (cut, zeroed, the
active file deleted): the manifest records a reservation, an offset every
offset handed out stays below. It is raised RESERVE_STEP offsets ahead of
the high watermark, and made durable, before a batch that would pass it is
written, so it costs one manifest write per RESERVE_STEP offsets. When an
unclean stop left evidence of lost bytes, offsets go on from the
reservation and the gap is quarantined as a lost range; without such
evidence the log's end is trusted and nothing is skipped.

A range an open quarantined is made durable in the manifest before the
partition serves: a batch right after a quarantined range reads as an
offset jump (a flipped base offset, as far as the scan can tell) unless
the manifest names the range, and the next unclean start would cut it and
every acknowledged write after it; offsets the files no longer show would
be handed out again.

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
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from .. import batch_format as bf
from ..activity import StoreActivity
from ..api import AppendResult, FsyncPolicy, Partition, PartitionletInfo, TimestampHit
from ..errors import (
    CorruptBatchError,
    DamagedRangeError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    StorageError,
    StorageFullError,
    StorageUnavailableError,
)
from ..namespace import Settings, TopicState, now_ms
from ..partition_base import PartitionBase, RecordTimestamps
from . import layout
from .chain_load import ChainLoader, LoadedChain, LoadingStore
from .files import FULL_ERRNOS, fsync_path, new_file, unlink_files, write_atomic
from .handles import FileHandles
from .move import move_home
from .partitionlet import Partitionlet
from .sync import GroupCommit
from .volumes import Volume, pick_volume

T = TypeVar("T")

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1
RESERVE_STEP = 100_000  # offsets reserved ahead of the high watermark per manifest write


class PartitionStore(LoadingStore, Protocol):
    """What a partition needs of the store that opened it (declared here: the store imports this module)."""

    epoch: int  # the store's open counter: no partition opens below it
    record_timestamps: RecordTimestamps | None
    activity: StoreActivity
    skip_damaged: bool  # reads step over quarantined ranges instead of failing
    verify_reads: bool  # reads check CRCs of bytes not verified since open
    move_bytes_per_second: int | None

    def raise_epoch(self, seen: int, where: str) -> int: ...


class DiskPartition(PartitionBase):
    def __init__(self, store: PartitionStore, topic: TopicState, index: int,
                 handles: FileHandles | None = None) -> None:
        """Open the partition (its tail recovered after a crash). `handles`: the descriptors the open
        reads through, when it runs in a thread (see use_handles); the store's by default."""
        super().__init__(f"{topic.stream.path}:{topic.name}/{index}", store.epoch, store.record_timestamps)
        self._store = store
        self._topic = topic
        self._index = index
        self._manifest_path = os.path.join(self.dir_on(store.volumes[0].path), layout.MANIFEST_FILE)
        self._chain: list[Partitionlet] = []
        self._bases: list[int] = []
        self._checkpoint = 0  # size of the active partitionlet the manifest vouches for
        self._reserved = 0  # every offset handed out is below it (durable in the manifest)
        self._manifest_stale = False
        self._skipped: set[tuple[int, int]] = set()  # damaged ranges already logged as skipped
        self._unavailable_logged = False
        self._home: Volume | None = None  # where its partitionlets are kept, once chosen (see move.py)
        self.move_stop = threading.Event()  # set on close: a copy under way is abandoned
        self._mover: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._commit = GroupCommit(self._fsync_active, store.activity.fsynced)
        loaded = ChainLoader(store, self.name, topic.id_hex, self._manifest_path, self.dir_on, handles).load()
        self._take_over(loaded)
        if self._epochs and self._epochs[-1][0] >= self._leader_epoch:
            # store.json went back (a stale copy, or rebuilt without this manifest): epochs never go down
            self._leader_epoch = store.raise_epoch(self._epochs[-1][0], self.name)
        self._commit.synced = self._commit.written = self._hw
        if self._note_epoch(self._leader_epoch, self._hw):
            self._manifest_stale = True
        if loaded.must_save or (loaded.manifest_stale and any(p.holes for p in loaded.chain)):
            self._save_recovered()  # quarantined ranges the manifest does not name yet
        self.resume_move()

    def resume_move(self) -> None:
        """Go on with a move cut short by a restart (run on the event loop; an open in a thread cannot)."""
        if self.away_from_home() and self._store.repair:
            self._start_moving()

    def use_handles(self, handles: FileHandles) -> None:
        """Read and write through `handles` from now on (the store's, once an open in a thread is done:
        only the event loop's thread uses those, so the LRU never closes a descriptor in use)."""
        for p in self._chain:
            p.handles = handles

    def dir_on(self, volume: str) -> str:
        """The partition's directory on a volume (its files on that volume, if any, are there)."""
        return layout.partition_dir(volume, self._topic.stream.path, self._topic.name, self._index)

    def _take_over(self, loaded: LoadedChain) -> None:
        """The state an open found on disk (chain_load.py) becomes this partition's."""
        self._chain, self._bases, self._epochs = loaded.chain, loaded.bases, loaded.epochs
        self._log_start, self._hw, self._reserved = loaded.log_start, loaded.hw, loaded.reserved
        self._checkpoint, self._home, self._manifest_stale = loaded.checkpoint, loaded.home, loaded.manifest_stale
        for epoch, base in loaded.tail_epochs:
            if self._note_epoch(epoch, base):
                self._manifest_stale = True

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
            "reserved": self._reserved,
            "epochs": self._epochs,
            "partitionlets": [p.info() for p in self._chain],
            **({"home": self._home.id} if self._home is not None else {}),
        }).encode()

    async def _save(self) -> None:
        """Checkpoint the active log and replace the manifest (caller holds the lock)."""
        if not self._store.repair:
            return  # an offline check writes nothing
        active = self._active()
        work = self._saving(active)
        try:
            await asyncio.to_thread(work)
        except OSError as exc:  # not a full disk (StorageFullError): the directory cannot be written
            raise self._unavailable(f"saving {self._manifest_path} failed: {exc.strerror or exc}") from exc
        self._checkpoint = active.size if active is not None else 0
        self._manifest_stale = False

    def _saving(self, active: Partitionlet | None) -> Callable[[], None]:
        """The file work of a save, to run off the event loop: the state is taken now."""
        indexes = active.index_bytes() if active is not None else None
        data = self._manifest()

        def work() -> None:
            if active is not None:
                fsync_path(active.log_path)
                active.write_index_files(*indexes)
            os.makedirs(os.path.dirname(self._manifest_path), exist_ok=True)
            write_atomic(self._manifest_path, data, on_full=self._store.volumes[0].release_ballast)

        return work

    def _save_recovered(self) -> None:
        """Save at once, in the opening thread, the ranges an open quarantined (the module docstring says why).

        The recovered log (cut, or started empty) no longer shows that its
        offsets up to the reservation may have been handed out; a kill
        before the next save would let the next open trust the old manifest
        and the shorter log, and hand those offsets out again; a range still
        in the file, unnamed by the manifest, would get the batches written
        after it cut (issue 28).
        """
        if not self._store.repair:
            return
        active = self._active()
        self._saving(active)()
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

    def unsaved(self) -> bool:
        """Whether checkpoint() has anything to do: bytes past the checkpoint, a stale manifest, work under way.

        Close asks this of every open partition (a stat at most) and
        checkpoints only those that answer yes: with 50,000 partitions open,
        a task each cost more than the few that had anything to save.
        """
        if self._lock.locked() or self._commit.busy:
            return True
        active = self._active()
        if active is not None and active.size != self._checkpoint:
            return True
        return self._manifest_stale and (bool(self._chain) or os.path.exists(self._manifest_path))

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

    async def append(
        self, batch: bytes | bytearray | memoryview, record_count: int, *, at: int | None = None,
        leader_epoch: int | None = None, fenced_by: Partition | None = None, txn_since: int | None = None,
        client_gone: Callable[[], bool] | None = None,
    ) -> AppendResult:
        self._check_open()
        view = memoryview(batch).cast("B")
        length, max_ts = bf.check_append(view, record_count)
        settings = self._topic.settings
        now = now_ms()
        if self._lock.locked() or self._hw + record_count > self._reserved or self._needs_roll(
                len(view), settings.partitionlet_bytes, settings.partitionlet_age_ms, now):

            async def section() -> int:
                self._check_open()
                reserved = self._reserved
                if self._hw + record_count > reserved:
                    self._reserved = self._hw + max(record_count, RESERVE_STEP)
                try:
                    if self._needs_roll(len(view), settings.partitionlet_bytes, settings.partitionlet_age_ms, now):
                        await self._roll(len(view))  # its manifest write holds the new reservation
                    elif self._reserved != reserved:
                        await self._save()
                except BaseException:
                    self._reserved = reserved  # not durable: not to be relied on
                    raise
                return self._write(view, length, max_ts, record_count, at)

            try:
                base = await self._critical(section)
            except OSError as exc:  # not a full disk (that is StorageFullError): the files cannot be written
                raise self._unavailable(f"rolling to a new partitionlet failed: {exc.strerror or exc}") from exc
        else:
            base = self._write(view, length, max_ts, record_count, at)
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

    def _write(self, view: memoryview, length: int, max_ts: int, record_count: int, at: int | None = None) -> int:
        """Write one batch at the high watermark (which must be `at` when given); returns its base offset."""
        active = self._chain[-1]
        base = self._hw
        if at is not None and at != base:
            raise OffsetMismatchError(f"{self.name}: append at offset {at} but the next offset is {base}", base)
        size = len(view)
        active.volume.ensure_reserve()
        active.volume.reserve(size)
        try:
            active.append(bf.PREFIX.pack(base, length, self._leader_epoch), view[bf.PREFIX_SIZE:], base,
                          base + record_count, max_ts)
        except OSError as exc:
            active.volume.release(size)
            if exc.errno in FULL_ERRNOS:
                raise StorageFullError(f"{self.name}: volume {active.volume.path} is full: {exc.strerror}") from exc
            raise self._unavailable(f"writing {active.log_path} failed: {exc.strerror or exc}") from exc
        self._hw = base + record_count
        self._commit.wrote(self._hw)
        return base

    async def _roll(self, size: int) -> None:
        """Seal the active partitionlet and start a new one at home, or else on the emptiest volume."""
        volume = self._home  # StorageFullError before anything changes
        if volume is None:
            volume = pick_volume(self._store.volumes, size)
        elif volume.free_bytes() < size:
            raise StorageFullError(f"{self.name}: its log dir {volume.path} has no room for {size} bytes")
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
        new = Partitionlet(self.dir_on(volume.path), volume, self._hw, self._store.handles, sealed=False,
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
        try:
            await self._commit.wait(min(offset, self._hw))
        except OSError as exc:
            raise self._unavailable(f"fsync of the active partitionlet failed: {exc.strerror or exc}") from exc

    # reading -----------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start or offset > self._hw:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self._log_start}, {self._hw}] of {self.name}")

    def _holding(self, offset: int) -> Partitionlet:
        """The partitionlet whose offsets cover `offset`."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        p = self._chain[i]
        if p.next_offset <= offset:  # between two partitionlets: offsets lost with damaged files
            resume = self._chain[i + 1].base if i + 1 < len(self._chain) else self._hw
            raise DamagedRangeError(f"{self.name}: offsets {p.next_offset}..{resume - 1} are lost", p.next_offset,
                                    resume)
        return p

    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """As the interface says; a read ends at the end of a partitionlet (one pread).

        Offsets in a quarantined range raise DamagedRangeError, or, when the
        store skips damaged data, are stepped over (logged once per range).
        """
        self._check_open()
        self._check_offset(offset)
        while offset < self._hw:
            try:
                data = await self._read_at(offset, max_bytes)
                if data:
                    return data
                offset = self._holding(offset).next_offset  # the log cleaner emptied the rest of it
                continue
            except DamagedRangeError as exc:
                if not self._store.skip_damaged:
                    raise
                if (exc.first, exc.resume_at) not in self._skipped:
                    self._skipped.add((exc.first, exc.resume_at))
                    log.warning("%s: skipping damaged offsets %d..%d (skip_damaged is on)", self.name, exc.first,
                                exc.resume_at - 1)
                offset = max(exc.resume_at, offset + 1)
        return b""

    def wait_for_data(self, offset: int) -> asyncio.Future[None]:
        """As the interface says; when damaged offsets are skipped, data past the quarantined range counts.

        A consumer sitting in a quarantined range that reaches the high
        watermark has nothing to read until new data arrives: its long poll
        must wait for that, not spin.
        """
        if self._store.skip_damaged:
            while offset < self._hw:
                try:
                    hole = self._holding(offset).hole_at(offset)
                except DamagedRangeError as exc:
                    offset = exc.resume_at
                    continue
                if hole is None:
                    break
                offset = hole[1]
        return super().wait_for_data(offset)

    async def _read_at(self, offset: int, max_bytes: int) -> bytes:
        p = self._holding(offset)
        try:
            return p.read(offset, max_bytes, self._store.verify_reads)
        except (CorruptBatchError, LookupError):
            pass  # damage the background check has not reached yet: check this partitionlet now, then retry
        except OSError as exc:
            raise self._unavailable(f"reading {p.log_path} failed: {exc.strerror or exc}") from exc
        if not await self._verify(p):
            p.reindex()  # the log is intact: its index led astray
        try:
            return p.read(offset, max_bytes, self._store.verify_reads)
        except (CorruptBatchError, LookupError) as exc:
            raise self._unavailable(f"{p.log_path} is damaged: {exc}") from exc
        except OSError as exc:
            raise self._unavailable(f"reading {p.log_path} failed: {exc.strerror or exc}") from exc

    def _unavailable(self, reason: str) -> StorageUnavailableError:
        """The error for a read that cannot be served; logged once per partition, not per request."""
        if not self._unavailable_logged:
            self._unavailable_logged = True
            log.error("%s: %s; answering KAFKA_STORAGE_ERROR", self.name, reason)
        return StorageUnavailableError(f"{self.name}: {reason}")

    # verification ------------------------------------------------------------

    async def verify(self) -> int:
        """Check the CRC of every stored batch not checked since open; returns damaged ranges found.

        The store runs this once for every partition after opening, in the
        background; reads check what it has not reached yet themselves.
        """
        self._check_open()
        found = 0
        for p in list(self._chain):
            if not p.missing and p.verified < p.size:
                found += await self._verify(p)
        return found

    async def _verify(self, p: Partitionlet) -> int:
        stop, stop_offset = p.size, p.next_offset
        try:
            holes = await asyncio.to_thread(p.verify, stop, stop_offset)
        except FileNotFoundError:
            if p.missing or self._closed or p not in self._chain:  # deleted by retention meanwhile
                return 0
            p.missing = True
            self._store.report(p.log_path, "is missing", f"quarantine offsets {p.base}..{p.next_offset - 1}",
                               error=True)
            return 1
        except OSError as exc:
            raise self._unavailable(f"verifying {p.log_path} failed: {exc.strerror or exc}") from exc
        p.verified = max(p.verified, stop)
        holes = [h for h in holes if p.hole_at(h.first) is None]  # a read may have quarantined it meanwhile
        for hole in holes:
            p.add_hole(hole.first, hole.resume, hole.pos, hole.end)
            self._store.report(p.log_path, hole.reason, f"quarantine offsets {hole.first}..{hole.resume - 1}",
                               error=True)
        if holes:
            self._manifest_stale = True
            await self.checkpoint()
        return len(holes)

    def _live(self) -> list[Partitionlet]:
        return [p for p in self._chain if p.next_offset > self._log_start and p.size > 0 and not p.missing]

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        self._check_open()
        try:
            return self._offset_for_timestamp(timestamp)
        except (OSError, CorruptBatchError, LookupError) as exc:
            raise self._unavailable(f"a timestamp lookup failed: {exc}") from exc

    def _offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
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
        try:
            return self._max_timestamp()
        except (OSError, CorruptBatchError, LookupError) as exc:
            raise self._unavailable(f"a timestamp lookup failed: {exc}") from exc

    def _max_timestamp(self) -> TimestampHit | None:
        """Kafka's UnifiedLog for MAX_TIMESTAMP: the first kept partitionlet with the greatest max
        timestamp, then the first batch in it that reached it (max_ts_offset), below the log start or not."""
        kept = [p for p in self._chain if p.size > 0 and not p.missing]
        if not kept:
            return None
        best = max(kept, key=lambda p: p.max_ts)  # max() keeps the first of equals
        pos, size = best.locate(best.max_ts_offset)
        pos, base, size, last, max_ts, attrs = next(best.walk(pos, pos + size))
        return self._offset_of_max(best.batch(pos, size), base, last, max_ts, bool(attrs & bf.ATTR_LOG_APPEND_TIME))

    async def partitionlets(self) -> list[PartitionletInfo]:
        return [PartitionletInfo(p.base, p.next_offset, p.size, p.volume.path, p.sealed, p.max_ts)
                for p in self._chain]

    # removing ----------------------------------------------------------------

    async def delete_records(self, before_offset: int) -> int:
        self._check_open()
        before_offset = self._deletion_point(before_offset)
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

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_open()

        async def section() -> None:
            if offset < self._hw:
                raise OffsetOutOfRangeError(f"cannot restart {self.name} at {offset}: it ends at {self._hw}")
            # one manifest write moves both ends; the dropped files go after it
            self._hw = offset
            self._commit.wrote(offset)
            await self._drop(len(self._chain), offset)

        await self._critical(section)
        self._wake()

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
        if settings.ttl_ms >= 0:
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
        self._store.activity.retained(drop, sum(p.size for p in chain[:drop]))
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

    async def replace_partitionlets(self, cleaned: list[tuple[Partitionlet, Partitionlet]], *,
                                    reserved: bool = False) -> int:
        """Swap cleaned or moved partitionlets into the chain: (old, new) pairs, same base and offsets.

        The new files are complete and fsynced; one atomic manifest write
        makes the swap, then the old files go. A pair whose old partitionlet
        left the chain meanwhile (retention, DeleteRecords, topic deleted)
        is skipped and its new files removed. `reserved`: the new files'
        room was claimed on their volume before they were written. Returns
        how many were swapped.
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
                if not reserved:
                    new.volume.reserve(new.size)
            for new in stale if reserved else ():
                new.volume.release(new.size)
            paths = [path for old, _ in swapped for path in old.paths()] + [
                path for new in stale for path in new.paths()]
            if paths:
                await asyncio.to_thread(unlink_files, paths)
            return len(swapped)

        return await self._critical(section)

    # log dirs ----------------------------------------------------------------

    @property
    def home(self) -> Volume | None:
        """The volume chosen for this partition's partitionlets (None: wherever there is most room)."""
        return self._home

    @property
    def move_stopping(self) -> bool:
        return self._closed or self.move_stop.is_set()

    def log_dir(self) -> str | None:
        return self._home.path if self._home is not None else None

    def move_rate(self) -> int | None:
        """The bytes per second a move may copy now (the store's setting, read as the copy goes)."""
        return self._store.move_bytes_per_second

    def away_from_home(self) -> list[Partitionlet]:
        """The sealed partitionlets that are still to be moved home, oldest first."""
        home = self._home
        if home is None:
            return []
        return [p for p in self._chain if p.volume is not home and p.sealed]

    async def settled_away_from_home(self) -> list[Partitionlet]:
        """away_from_home() once no roll is under way (a partitionlet being sealed has its indexes written then)."""
        async with self._lock:
            return self.away_from_home()

    async def move_to_log_dir(self, log_dir: str) -> None:
        """Make the volume at `log_dir` this partition's home and move its partitionlets there (see move.py).

        The home is saved in the manifest and the active partitionlet, when
        it sits elsewhere, is rolled so that appends go on at home at once;
        the sealed ones follow in the background. StorageFullError when the
        home has no room for the roll.
        """
        self._check_open()
        target = next((v for v in self._store.volumes if v.path == log_dir), None)
        if target is None:
            raise StorageError(f"{log_dir} is not one of the store's data dirs")

        async def section() -> None:
            self._check_open()
            active = self._active()
            if self._home is target and (active is None or active.volume is target):
                return
            self._home = target
            if active is not None and active.volume is not target:
                await self._roll(0)
            else:
                await self._save()
            log.info("%s: its log dir is now %s", self.name, target.path)

        try:
            await self._critical(section)
        except OSError as exc:  # not a full disk (that is StorageFullError): the files cannot be written
            raise self._unavailable(f"moving to {log_dir} failed: {exc.strerror or exc}") from exc
        self._start_moving()

    def _start_moving(self) -> None:
        """Run the move in the background unless it already runs (it follows a change of home by itself)."""
        if self._mover is not None and not self._mover.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # opened outside the event loop (an offline check): the next open moves
        self._mover = loop.create_task(self._move())

    async def _move(self) -> None:
        try:
            moved = await move_home(self)
        except Exception:
            log.exception("%s: moving its partitionlets to %s failed", self.name, self.log_dir())
            return
        if moved and not self.away_from_home():
            log.info("%s: all of its partitionlets are in %s now", self.name, self.log_dir())

    @property
    def moving(self) -> bool:
        return self._mover is not None

    async def stop_moving(self) -> None:
        """Abandon a move under way (the store is closing); the next open resumes it."""
        self.move_stop.set()
        if self._mover is not None:
            await asyncio.gather(self._mover, return_exceptions=True)

    def close(self) -> None:
        """The topic is gone: release files and pollers."""
        self.move_stop.set()
        self._commit.cancel()
        for p in self._chain:
            p.close_file()
        self._mark_closed()
