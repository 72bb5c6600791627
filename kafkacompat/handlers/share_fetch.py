"""ShareFetch (KIP-932): acknowledge what the member sends, then acquire records for it under a lock.

The share session (Kafka's ShareSessionCache) keeps the partitions a member
fetches: epoch 0 opens it with the partitions named, later epochs add and
forget partitions, -1 closes it (acknowledgements only; what the member
still holds becomes available). Records come back as whole log batches with
the offset runs the member acquired and their delivery counts; when nothing
can be acquired the request waits up to max_wait for new records or for
records given back. The group's share.isolation.level=read_committed keeps
aborted transactions' records from members and waits for open ones to end.
The bytes handed out count against the client's consumer_byte_rate quota,
as Fetch's do: over it, the answer says how long to wait and the connection
is muted that long, but keeps its records (they are acquired under locks
already; dropping them would only hold them away from every member).
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from typing import Any

from kafkacompat import storage

from ..broker.quotas import FETCH as CONSUMER_BYTE_RATE
from ..services import Request
from ..shares.manager import Delivery, ShareSessionError
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .group_common import millis
from .registry import Api, changes
from .share_common import Leaders, PartitionKey, Shares, acknowledge, deposed, refusal, serving

# ShareFetch v1; error answers: a top-level code (a share-session error)
API = Api(78, (1, 1), changes())


def _keys(topics: Any) -> list[PartitionKey]:
    return [(t.topic_id, p.partition_index) for t in topics for p in t.partitions]


def _forgotten(request: Any) -> list[PartitionKey]:
    return [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]


async def _acquire(ctx: Request[Shares], request: Any, wanted: list[PartitionKey],
                   errors: dict[PartitionKey, ErrorCode]) -> dict[PartitionKey, Delivery]:
    shares = ctx.cluster.shares
    records_left, bytes_left = request.max_records, request.max_bytes
    out: dict[PartitionKey, Delivery] = {}
    for key in wanted:
        if records_left <= 0 or bytes_left <= 0:
            break
        partition, error = await serving(ctx, *key)
        if partition is None:
            errors[key] = error
            continue
        try:
            delivery = await shares.acquire(request.group_id, request.member_id, key[0], key[1], partition,
                                            records_left, bytes_left)
        except storage.StorageError as exc:  # its records or its state cannot be read now (the store logged why)
            errors[key] = storage_error_code(exc)
            continue
        if delivery is not None:
            out[key] = delivery
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in delivery.acquired)
            bytes_left -= len(delivery.records)
    return out


async def _wait(ctx: Request[Shares], wanted: list[PartitionKey], group_id: str, deadline: float) -> None:
    """Until a fetched partition has records past its in-flight window, records are given back, or the deadline."""
    shares = ctx.cluster.shares
    waiters: list[asyncio.Future[Any]] = [shares.released()]
    for topic_id, index in wanted:
        partition, _ = await serving(ctx, topic_id, index)
        if partition is not None and (group_id, topic_id, index) in shares.partitions:
            waiters.append(await shares.new_records(group_id, topic_id, index, partition))
    try:
        await asyncio.wait(waiters, timeout=max(deadline - time.monotonic(), 0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters[1:]:
            waiter.cancel()


def _throttle(ctx: Request[Shares], deliveries: dict[PartitionKey, Delivery]) -> datetime.timedelta:
    """Count the records' bytes against the client's consumer quota; the wait it owes (the connection is muted)."""
    quotas = ctx.cluster.quotas
    if not quotas.active:
        return NO_THROTTLE
    ctx.throttle_ms = quotas.record(ctx.header.client_id, CONSUMER_BYTE_RATE,
                                    sum(len(d.records) for d in deliveries.values()))
    return datetime.timedelta(milliseconds=ctx.throttle_ms)


def _answer(m: Any, error: ErrorCode, message: str | None, lock_ms: int, responses: tuple = (),
            node_endpoints: tuple = (), throttle: datetime.timedelta = NO_THROTTLE) -> Any:
    return make(m.ShareFetchResponse, throttle_time=throttle, error_code=error, error_message=message,
                acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms), responses=responses,
                node_endpoints=node_endpoints)


async def handle(ctx: Request[Shares], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    refused = refusal(ctx, request.group_id, request.member_id)
    if refused is not None:
        return _answer(m, *refused, 0)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    lock_ms = shares.lock_duration_ms(group_id)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == -1 and (_forgotten(request) or any(not p.acknowledgement_batches for t in request.topics
                                                   for p in t.partitions)):
        return _answer(m, ErrorCode.invalid_request, "A final share fetch request may only acknowledge.", lock_ms)
    try:
        session, is_new = shares.open_session(group_id, member_id, epoch, _keys(request.topics),
                                              _forgotten(request), has_acks, ctx.peer)
    except ShareSessionError as exc:
        return _answer(m, exc.code, str(exc), lock_ms)
    acks = await acknowledge(ctx, group_id, member_id, request.topics)
    errors: dict[PartitionKey, ErrorCode] = {}
    deliveries: dict[PartitionKey, Delivery] = {}
    if session is None:  # the final epoch: the session ends, what the member holds goes back
        shares.end_sessions(group_id, member_id)
    else:
        wanted = list(session.partitions)
        deliveries = await _acquire(ctx, request, wanted, errors)
        deadline = time.monotonic() + millis(request.max_wait) / 1000
        while not deliveries and not errors and wanted and time.monotonic() < deadline:
            await _wait(ctx, wanted, group_id, deadline)
            if shares.sessions.get((group_id, member_id)) is not session:
                break  # the session was replaced or closed meanwhile
            deliveries = await _acquire(ctx, request, wanted, errors)
    lost = await shares.flush()
    deposed(acks, lost)
    for key in lost & deliveries.keys():  # acquired under state this broker may no longer keep
        del deliveries[key]
        errors[key] = ErrorCode.not_leader_or_follower
    shown: dict[PartitionKey, None] = {}
    if is_new and session is not None:
        shown.update(dict.fromkeys(session.partitions))
    shown.update(dict.fromkeys([*acks, *errors, *deliveries]))
    topics: dict[uuid.UUID, list[Any]] = {}
    leaders = Leaders(ctx, m)
    for key in shown:
        delivery = deliveries.get(key)
        ack_error, ack_message = acks.get(key, (ErrorCode.none, None))
        topics.setdefault(key[0], []).append(make(
            m.PartitionData, partition_index=key[1], error_code=errors.get(key, ErrorCode.none), error_message=None,
            acknowledge_error_code=ack_error, acknowledge_error_message=ack_message,
            current_leader=leaders.current(key, errors.get(key, ErrorCode.none), ack_error),
            records=delivery.records if delivery is not None else b"",
            acquired_records=tuple(
                make(m.AcquiredRecords, first_offset=a.first_offset, last_offset=a.last_offset,
                     delivery_count=a.delivery_count)
                for a in (delivery.acquired if delivery is not None else ())
            ),
        ))
    responses = tuple(make(m.ShareFetchableTopicResponse, topic_id=topic_id, partitions=tuple(parts))
                      for topic_id, parts in topics.items())
    return _answer(m, ErrorCode.none, None, lock_ms, responses, leaders.endpoints(), _throttle(ctx, deliveries))
