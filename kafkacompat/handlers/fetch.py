"""Fetch: hand stored batches back as they are, with long polls.

Sessionless (session id 0): every request is answered in full, which every
client accepts. Records start with the batch holding the fetch offset; at
least one whole batch comes back for the first partition with data even
past max_bytes (Kafka's minOneMessage); every later partition gets the
whole batches that fit what is left of max_bytes and of its own
partition_max_bytes, or nothing. Kafka sends the same batches plus the cut
start of the next one (its file slice ends at the byte limit), which clients
skip. Empty records are zero-length, never null.

read_committed (isolation level 1) is served up to the last stable offset,
with the aborted transactions of that range, so the client drops their
records; every answer carries the partition's last stable offset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.protocol.fetch_response import Buffer, PartitionAnswer, encode_fetch_response
from kafkacompat.protocol.records import count_records

from ..broker.quotas import FETCH as CONSUMER_BYTE_RATE
from ..security.acls import Operation
from ..services import Placement, Request, Security, Settings, Topics, Transactions
from ..transactions import PartitionTxns
from ..transactions.partition_state import stable_prefix
from .common import ErrorCode, leader_epoch_error, storage_error_code
from .registry import Api, changes

# Fetch v4-17; an injected error is answered from the request (a long poll would delay it), per partition: a
# top-level code is a fetch-session error
API = Api(1, (4, 17), changes(("topics",), "responses", fixed={"error_code": ErrorCode.none, "session_id": 0}))


class Reaches(Topics, Placement, Security, Transactions, Settings, Protocol):
    """What of the broker this module reaches."""

TOPIC_IDS_FROM = 13  # v13+ name topics by id
READ_COMMITTED = 1


@dataclasses.dataclass(slots=True)
class _Wanted:
    topic_key: str | uuid.UUID
    index: int
    offset: int
    max_bytes: int
    partition: storage.Partition | None = None
    error: ErrorCode = ErrorCode.none
    records: Any = b""
    key: tuple[str, str, int] | None = None
    txns: PartitionTxns | None = None
    aborted: list[tuple[int, int]] | None = None


async def _plan(ctx: Request[Reaches], request: Any) -> list[_Wanted]:
    cluster = ctx.cluster
    by_id = ctx.version >= TOPIC_IDS_FROM
    authorizer = cluster.authorizer
    plan = []
    found = []
    for topic in request.topics:
        info = None
        error = ErrorCode.none
        if by_id:
            key: Any = topic.topic_id
            info = cluster.by_id(topic.topic_id)
            if info is None:
                error = ErrorCode.unknown_topic_id
            elif authorizer.enabled and not authorizer.known_topic(ctx, Operation.READ, info.stream, info.name):
                info, error = None, ErrorCode.topic_authorization_failed
        else:
            key = topic.topic
            if authorizer.enabled and not authorizer.topic(ctx, Operation.READ, topic.topic):
                info, error = None, ErrorCode.topic_authorization_failed  # checked before existence, as Kafka does
            else:
                info, error = cluster.topic_for(topic.topic)
        found.append((topic, key, info, error))
    await cluster.open_partitions((info, part.partition) for topic, _, info, _ in found for part in topic.partitions)
    for topic, key, info, error in found:
        for part in topic.partitions:
            wanted = _Wanted(key, part.partition, part.fetch_offset, part.partition_max_bytes)
            wanted.partition, wanted.error = await cluster.serving_partition(info, error, part.partition)
            if wanted.partition is not None:
                assert info is not None
                wanted.key = (info.stream, info.name, part.partition)
                wanted.error = leader_epoch_error(cluster.leader_epoch(info, part.partition, wanted.partition),
                                                  getattr(part, "current_leader_epoch", -1))
            plan.append(wanted)
    return plan


async def _read(ctx: Request[Reaches], plan: list[_Wanted], max_bytes: int, committed: bool) -> int:
    """Fill records where data is ready; returns the bytes gathered."""
    total = 0
    for wanted in plan:
        partition = wanted.partition
        if partition is None or wanted.error != ErrorCode.none:
            continue
        if wanted.txns is None or (committed and wanted.txns.follow_log):  # markers from other brokers: catch_up
            assert wanted.key is not None
            try:
                wanted.txns = await ctx.cluster.transactions.partitions.get(*wanted.key)
            except storage.StorageError as exc:
                wanted.error = storage_error_code(exc)
                continue
        if wanted.offset < partition.log_start_offset or wanted.offset > partition.high_watermark:
            wanted.error = ErrorCode.offset_out_of_range
            continue
        limit = wanted.txns.last_stable_offset if committed else partition.high_watermark
        if committed:
            wanted.aborted = [(a.producer_id, a.first_offset) for a in wanted.txns.aborted_between(wanted.offset, limit)]
        if wanted.offset >= limit:
            wanted.records = b""
            continue
        budget = min(wanted.max_bytes, max_bytes - total)
        first_with_data = total == 0
        if budget <= 0 and not first_with_data:
            wanted.records = b""
            continue
        try:
            data = await partition.read(wanted.offset, max(budget, 1))
        except storage.DamagedRangeError:
            # quarantined: Kafka's answer for a record that fails its checks, which clients hand to the
            # application (Java throws, librdkafka and kafka-python report it) rather than retry in silence
            wanted.error = ErrorCode.corrupt_message
            continue
        except storage.StorageError as exc:
            wanted.error = storage_error_code(exc)
            continue
        if limit < partition.high_watermark:
            data = data[: stable_prefix(data, limit)]
        if len(data) > budget and not first_with_data:
            data = b""  # its first batch does not fit what is left: Kafka sends nothing for it
        wanted.records = data
        total += len(data)
    return total


def _response(ctx: Request[Reaches], plan: list[_Wanted]) -> list[Buffer]:
    """The body as chunks: stored records are handed to the transport, not copied."""
    quotas = ctx.cluster.quotas
    if quotas.active:
        size = sum(len(w.records) for w in plan)
        ctx.throttle_ms = quotas.record(ctx.header.client_id, CONSUMER_BYTE_RATE, size)
        if ctx.throttle_ms:  # over the quota: Kafka answers without data and does not count it
            quotas.unrecord(ctx.header.client_id, CONSUMER_BYTE_RATE, size)
            return encode_fetch_response(ctx.version, [], throttle_time_ms=ctx.throttle_ms)
    topics: dict[Any, list[PartitionAnswer]] = {}
    for wanted in plan:
        _count(ctx, wanted)
        answered = wanted.error in (ErrorCode.none, ErrorCode.offset_out_of_range)
        p = wanted.partition if answered else None
        hw = p.high_watermark if p is not None else -1
        lso = wanted.txns.last_stable_offset if p is not None and wanted.txns is not None else hw
        topics.setdefault(wanted.topic_key, []).append(PartitionAnswer(
            wanted.index,
            wanted.error.value,
            hw,
            lso,
            p.log_start_offset if p is not None else -1,
            wanted.records if wanted.error == ErrorCode.none else b"",
            wanted.aborted if wanted.error == ErrorCode.none else None,
        ))
    return encode_fetch_response(ctx.version, list(topics.items()), throttle_time_ms=ctx.throttle_ms)


def _count(ctx: Request[Reaches], wanted: _Wanted) -> None:
    """The partition's error or its bytes sent, in the broker's request stats."""
    stats = ctx.cluster.stats
    if wanted.error != ErrorCode.none:
        stats.error(ctx.header.api_key, ctx.version, wanted.error.name)
    elif wanted.records:
        key = wanted.topic_key
        if not isinstance(key, str):  # a topic id (Fetch v13+)
            info = ctx.cluster.by_id(key)
            key = ctx.cluster.display_name(info) if info is not None else str(key)
        stats.fetched(key, len(wanted.records), count_records(wanted.records))


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    plan = await _plan(ctx, request)
    max_bytes = request.max_bytes if ctx.version >= 3 else 2**31 - 1
    committed = request.isolation_level == READ_COMMITTED
    total = await _read(ctx, plan, max_bytes, committed)
    wait_ms = request.max_wait.total_seconds() * 1000
    errors = any(w.error != ErrorCode.none for w in plan)
    if total >= request.min_bytes or wait_ms <= 0 or errors or not plan:
        return _response(ctx, plan)
    return _long_poll(ctx, plan, request.min_bytes, max_bytes, committed, time.monotonic() + wait_ms / 1000)


def _waiter(wanted: _Wanted, committed: bool) -> asyncio.Future[None]:
    """Resolved when this partition may have something new for the client."""
    assert wanted.partition is not None
    if committed and wanted.txns is not None:
        return wanted.txns.wait_stable(wanted.offset)
    return wanted.partition.wait_for_data(wanted.offset)


async def _long_poll(
    ctx: Request[Reaches], plan: list[_Wanted], min_bytes: int, max_bytes: int, committed: bool, deadline: float
) -> Any:
    """Wait for new data (or the deadline), then answer with what is there."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        waiters = [_waiter(w, committed) for w in plan if w.partition is not None]
        if not waiters:
            break
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        total = await _read(ctx, plan, max_bytes, committed)
        if total >= min_bytes or any(w.error != ErrorCode.none for w in plan):
            return _response(ctx, plan)
    await _read(ctx, plan, max_bytes, committed)
    return _response(ctx, plan)
