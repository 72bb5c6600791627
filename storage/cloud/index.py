"""The batch index of the cloud engine: which object holds each batch, read from PostgreSQL.

kc_batches maps a partition's offsets to byte ranges of immutable objects;
these are the reads of it (and the two statements that move a partition's
start) that partitions and the log cleaner make, and the fetch of the
batches' bytes from the object store with a cache in front. The store owns
the connection pool and passes it in; this module knows no partition, no
namespace and no store, so each of them may depend on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .. import batch_format as bf
from .objects import BatchCache, ObjectStore
from .outage import database_step

# (base offset, last offset, object id, position, length, epoch, max timestamp)
Entry = tuple[int, int, int, int, int, int, int]
# Ranged GETs one read makes at once. A partition fed by small, frequent produce requests has
# a batch per object; read one after the other, a new leader's scan of the log tail (producer
# and transaction state) took one object store round trip per batch: 10-20 s for a few hundred.
PARALLEL_GETS = 16
# An object at most this big is read whole when any of its batches is wanted, and every batch in it
# cached: a flush at a low rate puts a batch of each partition (of every topic) its broker leads in
# one small object, and a consumer of all of them then read it with a ranged GET per partition. In
# the kill loop's read-back, six partitions' backlog of such objects took over 60 s from moto.
WHOLE_GET_BYTES = 256 * 1024


def _follows(entry: Entry, before: Entry) -> bool:
    """Whether `entry` sits right after `before` in the same object: one ranged GET reads both."""
    return entry[2] == before[2] and entry[3] == before[3] + before[4]


class BatchIndex:
    def __init__(self, pool: Callable[[], Any], objects: ObjectStore, cache: BatchCache, origin: str) -> None:
        self.pool = pool  # the store's asyncpg pool (made when it opens)
        self.objects = objects
        self.cache = cache
        self.origin = origin  # this process, in NOTIFY payloads
        self.object_keys: dict[int, str] = {}
        self.object_sizes: dict[int, int] = {}  # of the objects read from the index (their batches may be read whole)
        self._whole_gets: dict[int, asyncio.Future[memoryview]] = {}  # objects being read whole, by id

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        with database_step("reading the database"):
            async with self.pool().acquire() as conn:
                return await conn.fetch(query, *args)

    def entries(self, rows: list[Any]) -> list[Entry]:
        out = []
        for r in rows:
            self.object_keys[r["object_id"]] = r["key"]
            self.object_sizes[r["object_id"]] = r["size"]
            out.append((r["base_offset"], r["last_offset"], r["object_id"], r["position"], r["length"], r["epoch"],
                        r["max_ts"]))
        return out

    _ROW = ("SELECT b.base_offset, b.last_offset, b.object_id, b.position, b.length, b.epoch, b.max_ts, o.key, o.size "
            "FROM kc_batches b JOIN kc_objects o ON o.id = b.object_id ")

    async def index_rows(self, pid: int, offset: int, limit: int) -> list[Entry]:
        """Index rows from the batch holding `offset` on."""
        return self.entries(await self.fetch(
            self._ROW + "WHERE b.pid = $1 AND b.base_offset >= coalesce((SELECT max(base_offset) FROM kc_batches "
            "WHERE pid = $1 AND base_offset <= $2), 0) AND b.last_offset >= $2 ORDER BY b.base_offset LIMIT $3",
            pid, offset, limit))

    async def head_rows(self, pid: int, offset: int, limit: int) -> list[tuple[Entry, bytes | None]]:
        """(index row, kept header or None) of the batches from the one holding `offset` on (`batch_head`)."""
        rows = await self.fetch(
            "SELECT b.base_offset, b.last_offset, b.object_id, b.position, b.length, b.epoch, b.max_ts, o.key, o.size, "
            "b.head "
            "FROM kc_batches b JOIN kc_objects o ON o.id = b.object_id WHERE b.pid = $1 AND b.base_offset >= "
            "coalesce((SELECT max(base_offset) FROM kc_batches WHERE pid = $1 AND base_offset <= $2), 0) "
            "AND b.last_offset >= $2 ORDER BY b.base_offset LIMIT $3", pid, offset, limit)
        return list(zip(self.entries(rows), (r["head"] for r in rows)))

    async def rows_between(self, pid: int, start: int, end: int, limit: int) -> list[Entry]:
        """Index rows of the batches whose base offset is in [start, end), in offset order."""
        return self.entries(await self.fetch(
            self._ROW + "WHERE b.pid = $1 AND b.base_offset >= $2 AND b.base_offset < $3 ORDER BY b.base_offset "
            "LIMIT $4", pid, start, end, limit))

    async def rows_by_timestamp(self, pid: int, timestamp: int, after: int) -> list[Entry]:
        return self.entries(await self.fetch(
            self._ROW + "WHERE b.pid = $1 AND b.max_ts >= $2 AND b.last_offset >= $3 ORDER BY b.base_offset LIMIT 16",
            pid, timestamp, after))

    async def row_of_max_timestamp(self, pid: int) -> Entry | None:
        rows = self.entries(await self.fetch(
            self._ROW + "WHERE b.pid = $1 ORDER BY b.max_ts DESC, b.base_offset LIMIT 1", pid))
        return rows[0] if rows else None

    async def epochs(self, pid: int) -> list[tuple[int, int]]:
        rows = await self.fetch("SELECT epoch, start_offset FROM kc_epochs WHERE pid = $1 ORDER BY epoch", pid)
        return [(r["epoch"], r["start_offset"]) for r in rows]

    async def partition_size(self, pid: int) -> tuple[int, int]:
        rows = await self.fetch("SELECT coalesce(sum(length), 0) AS size, coalesce(max(max_ts), -1) AS ts "
                                 "FROM kc_batches WHERE pid = $1", pid)
        return rows[0]["size"], rows[0]["ts"]

    async def advance_start(self, pid: int, start: int) -> int | None:
        rows = await self.fetch("SELECT kc_advance_start($1, $2, $3) AS start", self.origin, pid, start)
        return rows[0]["start"]

    async def restart_at(self, pid: int, offset: int) -> tuple[int, int] | None:
        """Drop every batch of a partition and go on at `offset`, in one transaction: (next offset,
        leader epoch), or None when `offset` is below the next offset (nothing changes) or the
        partition is gone. What a replica does when its source dropped the offsets it lacks."""
        with database_step(f"restarting partition {pid} at {offset}"):
            async with self.pool().acquire() as conn, conn.transaction():
                row = await conn.fetchrow("SELECT next_offset, leader_epoch FROM kc_partitions WHERE id = $1 "
                                          "FOR UPDATE", pid)
                if row is None or row["next_offset"] > offset:
                    return None
                await conn.execute("UPDATE kc_partitions SET next_offset = $2, log_start = $2, seg_base = NULL, "
                                   "seg_size = 0 WHERE id = $1", pid, offset)
                await conn.execute("DELETE FROM kc_batches WHERE pid = $1", pid)
                await conn.execute("DELETE FROM kc_segments WHERE pid = $1", pid)
                await conn.execute("SELECT kc_notify_data($1, $2)", self.origin,
                                   f"{pid}:{offset}:{offset}:{row['leader_epoch']}")
        return offset, row["leader_epoch"]

    def within_gets(self, entries: list[Entry], gets: int) -> list[Entry]:
        """The longest start of `entries` (one partition, ascending; the first always) whose batches
        not cached take at most `gets` ranged GETs: side by side in one object is one GET."""
        taken, last_miss = 0, None
        for i, entry in enumerate(entries):
            if self.cache.holds(entry[2], entry[3]):
                continue
            if last_miss is None or not _follows(entry, last_miss):  # a run of its own, as batch_bytes makes
                taken += 1
                if taken > gets and i:
                    return entries[:i]
            last_miss = entry
        return entries

    async def batch_bytes(self, entries: list[Entry]) -> bytearray:
        """The batches of `entries` (one partition, ascending) with their offsets and epochs written in."""
        found: dict[int, memoryview] = {}
        misses: list[Entry] = []
        for entry in entries:
            data = self.cache.get(entry[2], entry[3])
            if data is None:
                misses.append(entry)
            else:
                found[entry[0]] = data
        runs: list[list[Entry]] = []  # batches side by side in one object: one ranged GET
        for entry in misses:
            run = runs[-1] if runs else None
            if run and _follows(entry, run[-1]):
                run.append(entry)
            else:
                runs.append([entry])
        turns = asyncio.Semaphore(PARALLEL_GETS)

        async def get(run: list[Entry]) -> None:
            start, end = run[0][3], run[-1][3] + run[-1][4]
            size = self.object_sizes.get(run[0][2])
            async with turns:
                if size is not None and size <= WHOLE_GET_BYTES:
                    start, blob = 0, await self._whole(run[0][2], size)
                else:
                    blob = memoryview(await self.objects.get_range(self.object_keys[run[0][2]], start, end))
            for e in run:
                piece = blob[e[3] - start:e[3] - start + e[4]]
                self.cache.put(e[2], e[3], piece)
                found[e[0]] = piece

        if len(runs) == 1:
            await get(runs[0])
        elif runs:
            await asyncio.gather(*map(get, runs))
        out = bytearray()
        for base, _last, _obj, _pos, length, epoch, _ts in entries:
            at = len(out)
            out += found[base]
            bf.PREFIX.pack_into(out, at, base, length - bf.LOG_OVERHEAD, epoch)
        return out

    async def _whole(self, object_id: int, size: int) -> memoryview:
        """A small object's bytes, each of its batches cached; one GET however many reads want it at once
        (the partitions of one Fetch are read side by side)."""
        def done(future: asyncio.Future[memoryview]) -> None:
            self._whole_gets.pop(object_id, None)
            if not future.cancelled():
                future.exception()  # seen: every read waiting for it has its error already

        pending = self._whole_gets.get(object_id)
        if pending is None:
            pending = self._whole_gets[object_id] = asyncio.ensure_future(self._get_whole(object_id, size))
            pending.add_done_callback(done)
        return await asyncio.shield(pending)

    async def _get_whole(self, object_id: int, size: int) -> memoryview:
        blob = memoryview(await self.objects.get_range(self.object_keys[object_id], 0, size))
        position = 0
        while position + bf.PREFIX_SIZE <= size:  # an object is its batches back to back
            length = bf.LOG_OVERHEAD + bf.PREFIX.unpack_from(blob, position)[1]  # base offset, length, epoch
            if length <= bf.LOG_OVERHEAD or position + length > size:
                break  # not a batch: cache nothing more (the index's positions are read as they are)
            self.cache.put(object_id, position, blob[position:position + length])
            position += length
        return blob
