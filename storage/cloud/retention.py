"""Retention and garbage collection of the cloud engine: log starts move, unreferenced objects go.

Every broker sharing a store runs a pass every retention_check_ms; an
advisory lock lets one of them do it at a time. A pass moves each retained
partition's log start past batches older than its retention.ms or beyond
its retention.bytes (kc_advance_start drops their index rows), then deletes
objects no index row has referred to for longer than the grace time (a
reader may still hold their keys), and now and then objects whose commit
never happened (a broker died between the PUT and kc_commit). The store
says which partitions are retained; this module knows no namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .index import BatchIndex
from .outage import database_errors, database_step

log = logging.getLogger(__name__)

GC_EVERY_PASSES = 10  # retention passes between sweeps for objects no commit recorded
RETENTION_LOCK = 0x6B63_7274  # advisory lock: one broker runs a retention pass at a time

# (partition id, oldest max timestamp kept or None, size cap in bytes or None)
Retained = tuple[int, int | None, int | None]
# a partition's log start moved: (partition id, next offset, log start)
StartMoved = Callable[[int, int, int], None]


PASS_CHUNK = 5_000  # partitions a retention pass looks at in one statement

# Where each partition's log start should be, for the partitions where that is past the current one.
# With a cutoff: the first batch not yet expired, and all after it, stay (none: up to the end). With a
# cap: leading batches go while what stays after them is still at least the cap.
DUE_STARTS = """
SELECT pid, start, next_offset FROM (
    SELECT u.pid, p.log_start, p.next_offset, greatest(
        CASE WHEN u.cutoff IS NULL THEN 0 ELSE coalesce(
            (SELECT min(b.base_offset) FROM kc_batches b WHERE b.pid = u.pid AND b.max_ts >= u.cutoff),
            p.next_offset) END,
        CASE WHEN u.cap IS NULL THEN 0 ELSE (
            SELECT coalesce(min(s.base_offset), 0) FROM (
                SELECT base_offset, length, sum(length) OVER (ORDER BY base_offset DESC) AS suffix
                FROM kc_batches b WHERE b.pid = u.pid) s
            WHERE s.suffix - s.length < u.cap) END) AS start
    FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(pid, cutoff, cap)
    JOIN kc_partitions p ON p.id = u.pid) due
WHERE start > log_start
"""


def _chunks(items: Iterable[Retained], size: int) -> Iterator[list[Retained]]:
    chunk: list[Retained] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Retention:
    def __init__(self, index: BatchIndex, start_moved: StartMoved) -> None:
        self._index = index
        self._start_moved = start_moved
        self._passes = 0

    async def run(self, partitions: Iterable[Retained], now: int, object_grace_ms: int) -> int:
        """One pass over `partitions` (read as it goes, PASS_CHUNK at a time), then the garbage
        collection of objects unreferenced for `object_grace_ms`; returns how many partitions' log
        starts moved (0 when another broker's pass holds the lock)."""
        moved = 0
        with database_step("a retention pass"):
            async with self._index.pool().acquire() as conn:
                if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", RETENTION_LOCK):
                    return 0
                try:
                    for chunk in _chunks(partitions, PASS_CHUNK):
                        moved += await self._retain(conn, chunk)
                    await self._collect(conn, now, object_grace_ms)
                finally:
                    await _unlock(conn)
        return moved

    async def _retain(self, conn: Any, chunk: list[Retained]) -> int:
        """Move the log start of each partition of `chunk` whose first batches are due: one statement
        finds them (three a partition made a pass over 100,000 partitions 300,000 round trips, the
        database busy with it all the time), then one kc_advance_start for each that moves."""
        due = await conn.fetch(DUE_STARTS, [pid for pid, _, _ in chunk], [cutoff for _, cutoff, _ in chunk],
                               [cap for _, _, cap in chunk])
        for row in due:
            new = await conn.fetchval("SELECT kc_advance_start($1, $2, $3)", self._index.origin, row["pid"],
                                      row["start"])
            if new is not None:
                self._start_moved(row["pid"], row["next_offset"], new)
        return len(due)

    async def _collect(self, conn: Any, now: int, object_grace_ms: int) -> None:
        """Delete objects no batch refers to for longer than the grace time (readers may hold their keys)."""
        await conn.execute("UPDATE kc_objects o SET unreferenced_ms = $1 WHERE unreferenced_ms IS NULL AND NOT "
                           "EXISTS (SELECT 1 FROM kc_batches b WHERE b.object_id = o.id)", now)
        rows = await conn.fetch("SELECT id, key FROM kc_objects o WHERE unreferenced_ms < $1 AND NOT EXISTS "
                                "(SELECT 1 FROM kc_batches b WHERE b.object_id = o.id)", now - object_grace_ms)
        if rows:
            await self._index.objects.delete([r["key"] for r in rows])
            await conn.execute("DELETE FROM kc_objects WHERE id = ANY($1)", [r["id"] for r in rows])
            log.info("deleted %d object(s) no longer referenced", len(rows))
        self._passes += 1
        if self._passes % GC_EVERY_PASSES == 1:
            await self._sweep_orphans(conn, now, object_grace_ms)

    async def _sweep_orphans(self, conn: Any, now: int, object_grace_ms: int) -> None:
        """Objects uploaded whose commit never happened (a broker died between PUT and commit)."""
        old = []
        async for key, modified in self._index.objects.list_data():
            if modified * 1000 < now - object_grace_ms:
                old.append(key)
        if not old:
            return
        known = {r["key"] for r in await conn.fetch("SELECT key FROM kc_objects WHERE key = ANY($1)", old)}
        orphans = [k for k in old if k not in known]
        if orphans:
            await self._index.objects.delete(orphans)
            log.info("deleted %d object(s) whose commit never happened", len(orphans))


async def _unlock(conn: Any) -> None:
    """Release the pass's session lock. A connection that cannot (a cancelled statement left it busy) is
    closed, which releases it too: the pool lends connections on without resetting their sessions."""
    try:
        await conn.execute("SELECT pg_advisory_unlock($1)", RETENTION_LOCK)
    except BaseException as exc:
        conn.terminate()
        if not isinstance(exc, database_errors()):
            raise
