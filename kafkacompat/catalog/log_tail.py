"""The batches at a partition's tail, read header by header after a restart.

Producer state (idempotence windows, open transactions) lives in memory and
is rebuilt from the last batches of the log, as Kafka rebuilds it from its
snapshots and the log tail. Only headers are parsed; records stay unread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kafkacompat import storage
from kafkacompat.protocol.records import HEADER_SIZE, BatchHeader, read_header

RESTORE_RECORDS = 100_000  # how far back from the high watermark a restore looks
RESTORE_BYTES = 32 << 20  # and at most this much of the log it reads


async def tail_batches(partition: storage.Partition,
                       start: int | None = None) -> AsyncIterator[tuple[BatchHeader, memoryview]]:
    """(header, whole batch) for each batch of the bounded tail, oldest first; from `start` on
    when given (the batches another broker appended since it was last read)."""
    offset = max(partition.log_start_offset, partition.high_watermark - RESTORE_RECORDS)
    if start is not None:
        offset = max(offset, start)
    budget = RESTORE_BYTES
    heads = getattr(partition, "batch_heads", None)
    if heads is not None:  # the cloud engine's index keeps the headers: no object is read
        async for data in heads(offset, budget):
            pos = 0
            while len(data) - pos >= HEADER_SIZE:  # a header alone, or whole batches read from an object
                header = read_header(data, pos)
                yield header, data[pos : pos + header.size]
                pos += header.size
        return
    while offset < partition.high_watermark and budget > 0:
        try:
            data = memoryview(await partition.read(offset, min(budget, 1 << 20)))
        except storage.DamagedRangeError as exc:  # quarantined: no producer state to learn there
            offset = exc.resume_at
            continue
        budget -= len(data)
        pos = 0
        while len(data) - pos >= HEADER_SIZE:
            header = read_header(data, pos)
            if pos + header.size > len(data):
                break
            yield header, data[pos : pos + header.size]
            offset = header.last_offset + 1
            pos += header.size
        if pos == 0:
            break  # nothing whole came back
