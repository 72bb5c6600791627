"""Fetch: hand stored batches back as they are, with long polls.

Sessionless (session id 0): every request is answered in full, which every
client accepts. Records start with the batch holding the fetch offset; at
least one whole batch comes back for the first partition with data even
past max_bytes; empty records are zero-length, never null.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

from kafkacompat import storage
from kafkacompat.protocol.fetch_response import Buffer, PartitionAnswer, encode_fetch_response

from .common import ErrorCode, leader_epoch_error, storage_error_code

TOPIC_IDS_FROM = 13  # v13+ name topics by id


@dataclasses.dataclass(slots=True)
class _Wanted:
    topic_key: str | uuid.UUID
    index: int
    offset: int
    max_bytes: int
    partition: storage.Partition | None = None
    error: ErrorCode = ErrorCode.none
    records: Any = b""


def _plan(ctx: Any, request: Any) -> list[_Wanted]:
    cluster = ctx.cluster
    by_id = ctx.version >= TOPIC_IDS_FROM
    plan = []
    for topic in request.topics:
        info = None
        error = ErrorCode.none
        if by_id:
            key: Any = topic.topic_id
            info = cluster.by_id(topic.topic_id)
            if info is None:
                error = ErrorCode.unknown_topic_id
        else:
            key = topic.topic
            info, error = cluster.topic_for(topic.topic)
        for part in topic.partitions:
            wanted = _Wanted(key, part.partition, part.fetch_offset, part.partition_max_bytes)
            wanted.partition, wanted.error = cluster.partition_for(info, error, part.partition)
            if wanted.partition is not None:
                wanted.error = leader_epoch_error(wanted.partition, getattr(part, "current_leader_epoch", -1))
            plan.append(wanted)
    return plan


async def _read(plan: list[_Wanted], max_bytes: int) -> int:
    """Fill records where data is ready; returns the bytes gathered."""
    total = 0
    for wanted in plan:
        partition = wanted.partition
        if partition is None or wanted.error != ErrorCode.none:
            continue
        if wanted.offset < partition.log_start_offset or wanted.offset > partition.high_watermark:
            wanted.error = ErrorCode.offset_out_of_range
            continue
        if wanted.offset == partition.high_watermark:
            wanted.records = b""
            continue
        budget = min(wanted.max_bytes, max_bytes - total)
        if budget <= 0 and total > 0:
            wanted.records = b""
            continue
        try:
            data = await partition.read(wanted.offset, max(budget, 1))
        except storage.StorageError as exc:
            wanted.error = storage_error_code(exc)
            continue
        wanted.records = data
        total += len(data)
    return total


def _response(ctx: Any, plan: list[_Wanted]) -> list[Buffer]:
    """The body as chunks: stored records are handed to the transport, not copied."""
    topics: dict[Any, list[PartitionAnswer]] = {}
    for wanted in plan:
        _count(ctx, wanted)
        p = wanted.partition
        ok = p is not None and wanted.error in (ErrorCode.none, ErrorCode.offset_out_of_range)
        hw = p.high_watermark if ok else -1
        topics.setdefault(wanted.topic_key, []).append(PartitionAnswer(
            wanted.index,
            wanted.error.value,
            hw,
            hw,
            p.log_start_offset if ok else -1,
            wanted.records if wanted.error == ErrorCode.none else b"",
        ))
    return encode_fetch_response(ctx.version, list(topics.items()))


def _count(ctx: Any, wanted: _Wanted) -> None:
    """The partition's error or its bytes sent, in the broker's request stats."""
    stats = ctx.cluster.stats
    if wanted.error != ErrorCode.none:
        stats.error(ctx.header.api_key, ctx.version, wanted.error.name)
    elif wanted.records:
        key = wanted.topic_key
        if not isinstance(key, str):  # a topic id (Fetch v13+)
            info = ctx.cluster.by_id(key)
            key = ctx.cluster.display_name(info) if info is not None else str(key)
        stats.fetched(key, len(wanted.records))


async def handle(ctx: Any, request: Any) -> Any:
    plan = _plan(ctx, request)
    max_bytes = request.max_bytes if ctx.version >= 3 else 2**31 - 1
    total = await _read(plan, max_bytes)
    wait_ms = request.max_wait.total_seconds() * 1000
    errors = any(w.error != ErrorCode.none for w in plan)
    if total >= request.min_bytes or wait_ms <= 0 or errors or not plan:
        return _response(ctx, plan)
    return _long_poll(ctx, plan, request.min_bytes, max_bytes, time.monotonic() + wait_ms / 1000)


async def _long_poll(ctx: Any, plan: list[_Wanted], min_bytes: int, max_bytes: int, deadline: float) -> Any:
    """Wait for new data (or the deadline), then answer with what is there."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        waiters = [w.partition.wait_for_data(w.offset) for w in plan if w.partition is not None]
        if not waiters:
            break
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        total = await _read(plan, max_bytes)
        if total >= min_bytes or any(w.error != ErrorCode.none for w in plan):
            return _response(ctx, plan)
    await _read(plan, max_bytes)
    return _response(ctx, plan)
