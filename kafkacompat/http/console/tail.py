"""The live tail: a topic's new records pushed to the browser as Server-Sent Events.

One reader per partition follows the partition as a Fetch long poll does:
read what is there, then await the partition's own `wait_for_data` (no
polling). Readers hand records to one bounded queue, so a slow browser
slows the readers instead of filling memory; the response's writes wait on
the socket. Records are shown as a read_uncommitted consumer sees them.

A comment line every KEEPALIVE_S keeps proxies from closing an idle stream
and tells a gone browser apart (the write fails). Open tails end when the
HTTP server shuts down. A tail reads records, so it needs READ on the
topic, as a consumer's Fetch does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from typing import Any

from aiohttp import web

from kafkacompat import storage
from kafkacompat.protocol.records import iter_records, whole_batches

from ...security.acls import Operation
from .pages import cluster_of
from .permission import authorizing, may_topic

log = logging.getLogger(__name__)
KEEPALIVE_S = 15.0
READ_BYTES = 256 * 1024
QUEUE_RECORDS = 500
MAX_PARTITIONS = 256  # a tail of a wider topic follows its first 256 partitions (or the one asked for)
SHOWN_CHARS = 2000  # longer keys and values are cut, as a terminal tail would
TAILS: web.AppKey[set[asyncio.Task[Any]]] = web.AppKey("console_tails")
_DONE = object()


def track_tails(app: web.Application) -> None:
    """Remember open tails so a shutting-down server ends them instead of waiting on them."""
    app[TAILS] = set()

    async def end_tails(app: web.Application) -> None:
        for task in list(app[TAILS]):
            task.cancel()

    app.on_shutdown.append(end_tails)


def shown(data: bytes | None) -> dict[str, Any] | None:
    """A key or value for display: text when it is UTF-8, else base64; cut at SHOWN_CHARS."""
    if data is None:
        return None
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(data).decode(), "base64"
    return {"text": text[:SHOWN_CHARS], "encoding": encoding, "bytes": len(data), "cut": len(text) > SHOWN_CHARS}


def batches_end(data: bytes | memoryview) -> int | None:
    """One past the last offset of the whole batches in `data` (control batches included); None if none is whole."""
    end = None
    for header in whole_batches(data):
        end = header.base_offset + header.last_offset_delta + 1
    return end


async def follow(partition: storage.ReadablePartition, index: int, position: int, queue: asyncio.Queue[Any]) -> None:
    """Put every record of one partition from `position` on into `queue`, waiting for new ones as they come."""
    try:
        while True:
            if position >= partition.high_watermark:
                await partition.wait_for_data(position)
            position = max(position, partition.log_start_offset)  # retention may have passed us
            data = await partition.read(position, READ_BYTES)
            end = batches_end(data)
            if end is None or end <= position:  # woken, yet nothing to read: the partition was closed
                await queue.put({"event": "end", "partition": index, "reason": "the partition is no longer readable"})
                return
            for record in iter_records(data):
                if record.offset >= position:
                    await queue.put({"event": "record", "partition": index, "offset": record.offset,
                                     "timestamp": record.timestamp, "key": shown(record.key),
                                     "value": shown(record.value),
                                     "headers": [[k, shown(v)] for k, v in record.headers]})
            position = end
    except storage.StorageError as exc:  # deleted topic, unreadable files
        await queue.put({"event": "end", "partition": index, "reason": str(exc)})
    finally:
        await queue.put(_DONE)


async def events(request: web.Request) -> web.StreamResponse:
    """GET /console/tail/events?stream=&topic=[&partition=][&from=end|beginning]: the SSE stream."""
    cluster = cluster_of(request)
    stream_path, name = request.query.get("stream", ""), request.query.get("topic", "")
    if authorizing(request) and not may_topic(request, Operation.READ, stream_path, name):  # before existence
        raise web.HTTPForbidden(reason=f"you may not READ topic {name!r} of stream {stream_path!r}")
    info = cluster.store.get_topic(stream_path, name) if stream_path.startswith("/") and name else None
    if info is None:
        raise web.HTTPNotFound(reason=f"topic {name!r} does not exist in stream {stream_path!r}")
    wanted = request.query.get("partition", "")
    indexes = range(min(info.partitions, MAX_PARTITIONS))
    if wanted:
        if not wanted.isdigit() or int(wanted) >= info.partitions:
            raise web.HTTPBadRequest(reason=f"partition {wanted!r} is not one of 0..{info.partitions - 1}")
        indexes = range(int(wanted), int(wanted) + 1)
    beginning = request.query.get("from") == "beginning"
    queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_RECORDS)
    readers = []
    for index in indexes:
        partition = await cluster.readable_partition(info.stream, info.name, index)
        start = partition.log_start_offset if beginning else partition.high_watermark
        readers.append(asyncio.create_task(follow(partition, index, start, queue)))

    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
    task = asyncio.current_task()
    assert task is not None
    request.app[TAILS].add(task)
    try:
        await response.prepare(request)
        await response.write(b"event: ready\ndata: {\"partitions\": %d}\n\n" % len(readers))
        running = len(readers)
        while running:
            try:
                item = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                await response.write(b": keepalive\n\n")
                continue
            if item is _DONE:
                running -= 1
                continue
            kind = item.pop("event")
            await response.write(f"event: {kind}\ndata: {json.dumps(item)}\n\n".encode())
    except ConnectionResetError:
        pass  # the browser went away
    except asyncio.CancelledError:
        # end_tails on the server's shutdown: returning lets aiohttp end the chunked body cleanly,
        # so the browser sees the stream close rather than a broken connection
        pass
    finally:
        request.app[TAILS].discard(task)
        for reader in readers:
            reader.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*readers, return_exceptions=True)
    return response
