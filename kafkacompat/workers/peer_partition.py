"""Another worker's partition, read through that worker: what worker 0's console, /metrics and links read.

Only a partition's owner opens its files (two processes never append to one
partition), and the HTTP server (console, REST, /metrics) and the replica
links run in worker 0. So worker 0 reads a partition of worker 1 by asking
worker 1 through the private WorkerState request
(kafkacompat/handlers/worker_state.py, `partition.*` operations): its
figures, its records from an offset, the offset of a timestamp, its
partitionlets. Before stop 56 the console showed worker 0's partitions
only, a group with offsets on worker 1 failed to render, and a replica link
of a stream with a partition on worker 1 shipped nothing at all.

The log start offset and high watermark are those of the last answer, as a
client's are of its last fetch (`refresh` asks again). Waiting for new
records is one long poll to the owner at a time, however many wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kafkacompat import storage

PartitionKey = tuple[str, str, int]  # (stream, topic, partition)
# WorkerView.ask_with_payload(body, what, worker index): the answer, and the raw bytes after it (records)
Ask = Callable[[dict[str, Any], str, int], Awaitable[tuple[Any, memoryview]]]
RETRY_S = 0.5  # after a long poll the owner did not answer (restarting): the waiters are woken this much later


class PeerPartition:
    """A storage.ReadablePartition of worker `owner`; StorageError from any call when it cannot be asked."""

    def __init__(self, ask: Ask, owner: int, key: PartitionKey) -> None:
        self._ask, self._owner, self._key = ask, owner, key
        self._start = self._end = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._poller: asyncio.Task[None] | None = None

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def high_watermark(self) -> int:
        return self._end

    async def refresh(self) -> None:
        await self._figures()

    async def read(self, offset: int, max_bytes: int) -> memoryview:
        found, records = await self._op_with_payload("partition.read", "records", offset=offset,
                                                     max_bytes=max_bytes)
        self._take(_parsed(found))
        return records

    async def offset_for_timestamp(self, timestamp: int) -> storage.TimestampHit | None:
        found = await self._op("partition.offset_for_timestamp", "offset of a timestamp", timestamp=timestamp)
        hit = found["hit"]
        return None if hit is None else storage.TimestampHit(hit["offset"], hit["timestamp"], hit["leader_epoch"])

    async def partitionlets(self) -> list[storage.PartitionletInfo]:
        return list((await self._figures(partitionlets=True)).partitionlets)

    def wait_for_data(self, offset: int) -> asyncio.Future[None]:
        """Done once the partition holds a record at `offset` (as far as the owner's answers say), or
        once the owner could not be asked (the caller's next read says why)."""
        future = asyncio.get_running_loop().create_future()
        if self._end > offset:
            future.set_result(None)
            return future
        self._waiters.append((offset, future))
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())
        return future

    async def _poll(self) -> None:
        """Long polls (the owner holds each until it has a record past the lowest offset waited for, or
        a few seconds pass) while anyone waits; a waiter that gave up (cancelled) is dropped."""
        while True:
            self._waiters = [(offset, future) for offset, future in self._waiters if not future.done()]
            if not self._waiters:
                return
            try:
                await self._figures(wait_beyond=min(offset for offset, _ in self._waiters))
            except storage.StorageError:
                await asyncio.sleep(RETRY_S)
                self._wake(lambda offset: True)
                continue
            self._wake(lambda offset: self._end > offset)

    def _wake(self, ready: Callable[[int], bool]) -> None:
        for offset, future in self._waiters:
            if not future.done() and ready(offset):
                future.set_result(None)

    async def _figures(self, **asked: Any) -> storage.PartitionFigures:
        found = _parsed(await self._op("partition.figures", "partition's figures", **asked))
        self._take(found)
        return found

    def _take(self, found: storage.PartitionFigures) -> None:
        self._start, self._end = found.log_start_offset, found.high_watermark

    async def _op(self, op: str, what: str, **asked: Any) -> dict[str, Any]:
        return (await self._op_with_payload(op, what, **asked))[0]

    async def _op_with_payload(self, op: str, what: str, **asked: Any) -> tuple[dict[str, Any], memoryview]:
        stream, topic, index = self._key
        found, payload = await self._ask({"op": op, "stream": stream, "topic": topic, "partition": index, **asked},
                                         f"{what} of {stream}:{topic}/{index}", self._owner)
        if not isinstance(found, dict):
            raise storage.StorageError(f"worker {self._owner} answered a {op} with something else than an object")
        return found, payload


def figures_of(answer: Any) -> storage.PartitionFigures | storage.StorageError:
    """One partition of a WorkerState `partitions.figures` answer: its figures, or why it has none."""
    try:
        if "error" in answer:
            return storage.StorageError(str(answer["error"]))
        return storage.PartitionFigures(answer["log_start_offset"], answer["high_watermark"], tuple(
            storage.PartitionletInfo(**row) for row in answer.get("partitionlets", ())))
    except (TypeError, KeyError) as exc:
        return storage.StorageError(f"a partition's figures came garbled: {exc!r}")


def _parsed(answer: Any) -> storage.PartitionFigures:
    """`figures_of` one partition's answer, its StorageError raised."""
    found = figures_of(answer)
    if isinstance(found, storage.StorageError):
        raise found
    return found
