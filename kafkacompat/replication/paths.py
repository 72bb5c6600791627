"""Where each replicated batch came from: its path of cluster UUIDs, origin first.

Kept beside the partition in the stream's own data path (the store's state
table `replica_paths`, one record per partition) and never written into the
batch, so a batch's bytes and CRC stay the producer's. A record holds
ranges [first offset, end offset, path]: consecutive batches with the same
path share one range, so one-way and chain topologies keep one range per
partition however many batches flow. Offsets no range covers were produced
here: their path is just this cluster. A record names the topic id it
belongs to, so a topic deleted and created again under the same name
starts with no path.

The table is the store's, or, in a worker other than 0 of `serve --workers
N`, worker 0's, through the WorkerState request (workers/state_client.py
`WorkerPathTable`): a partition's owner writes its paths there, and worker
0, whose links read them and cache them, drops what it cached of them.

The range is written before the batch is appended: after a crash between
the two, the range reaches past the high watermark and the next copy of
that offset (the link resends it) rewrites it; a batch is never stored
without its path, so it can never loop back to its origin.
"""

from __future__ import annotations

import bisect
from typing import Any, Protocol

from kafkacompat.storage import FsyncPolicy, Store

TABLE = "replica_paths"

Path = tuple[str, ...]


def _key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


class PathTable(Protocol):
    """Where a partition's ranges are kept: the store's `replica_paths` table (StorePathTable), or worker
    0's for another worker of `serve --workers N`."""

    async def read(self, stream: str, key: str) -> dict[str, Any] | None: ...

    async def put(self, stream: str, records: dict[str, dict[str, Any] | None], durable: bool) -> None: ...


class StorePathTable:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def read(self, stream: str, key: str) -> dict[str, Any] | None:
        return self._store.get_state(stream, TABLE).get(key)

    async def put(self, stream: str, records: dict[str, dict[str, Any] | None], durable: bool) -> None:
        await self._store.put_state(stream, TABLE, records, durable=durable)


class PathIndex:
    """Replication paths of the batches of every partition of one cluster's streams."""

    def __init__(self, store: Store, table: PathTable | None = None) -> None:
        self._store = store
        self._table: PathTable = table or StorePathTable(store)
        # (stream, key, topic id) -> [[first, end, path], ...]
        self._ranges: dict[tuple[str, str, str], list[list]] = {}

    def _topic_id(self, stream: str, topic: str) -> str:
        info = self._store.get_topic(stream, topic)
        return info.topic_id.hex if info is not None else ""

    def _load(self, stream: str, key: str, topic_id: str) -> list[list]:
        """The ranges of a partition of the topic `topic_id`, from the store's table (where links run)."""
        ranges = self._ranges.get((stream, key, topic_id))
        if ranges is None:
            ranges = self._ranges[stream, key, topic_id] = _ranges(self._store.get_state(stream, TABLE).get(key),
                                                                   topic_id)
        return ranges

    def drop_cached(self, stream: str, keys: list[str]) -> None:
        """Read these partitions' ranges afresh at their next use (another worker wrote them)."""
        for cached in [c for c in self._ranges if c[0] == stream and c[1] in keys]:
            del self._ranges[cached]

    def path_at(self, stream: str, topic: str, partition: int, offset: int) -> Path:
        """The clusters the batch at `offset` passed through before this one (empty: produced here)."""
        ranges = self._load(stream, _key(topic, partition), self._topic_id(stream, topic))
        if not ranges:
            return ()
        i = bisect.bisect_right(ranges, offset, key=lambda r: r[0]) - 1
        if i >= 0 and ranges[i][0] <= offset < ranges[i][1]:
            return ranges[i][2]
        return ()

    async def record(self, stream: str, topic: str, partition: int, first: int, end: int, path: Path) -> None:
        """Note that offsets [first, end) arrived along `path`, before they are appended."""
        key = _key(topic, partition)
        topic_id = self._topic_id(stream, topic)
        ranges = self._ranges.get((stream, key, topic_id))
        if ranges is None:
            ranges = self._ranges[stream, key, topic_id] = _ranges(await self._table.read(stream, key), topic_id)
        while ranges and ranges[-1][1] > first:  # left past the high watermark by a crash: rewritten now
            if ranges[-1][0] >= first:
                ranges.pop()
            else:
                ranges[-1][1] = first
        if ranges and ranges[-1][1] == first and ranges[-1][2] == path:
            ranges[-1][1] = end
        else:
            ranges.append([first, end, path])
        info = self._store.get_stream(stream)
        durable = info is not None and info.policy.fsync is FsyncPolicy.ALWAYS
        await self._table.put(stream, {key: {"topic_id": topic_id, "ranges": [[a, b, list(p)] for a, b, p in ranges]}},
                              durable)

    async def forget(self, stream: str, topic: str, partitions: int) -> None:
        """Drop the paths of a deleted topic's partitions."""
        keys = [_key(topic, p) for p in range(partitions)]
        self.drop_cached(stream, keys)
        existing = self._store.get_state(stream, TABLE)
        gone = {key: None for key in keys if key in existing}
        if gone:
            await self._store.put_state(stream, TABLE, gone)


def _ranges(record: dict[str, Any] | None, topic_id: str) -> list[list]:
    """A record's ranges, if it is of the topic `topic_id`: a record of an older topic of the same name
    (deleted and created again, here or by its source) is not this topic's."""
    if record and record.get("topic_id", topic_id) == topic_id:
        return [[r[0], r[1], tuple(r[2])] for r in record["ranges"]]
    return []
