"""DescribeProducers: the producers with state in a partition (kafka-transactions.sh describe-producers).

Per producer: epoch, last sequence and timestamp from the idempotence
window, and where its open transaction starts in the partition (-1: none).
"""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..security.acls import Operation
from ..services import Request, Security, Topics, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, reads

# DescribeProducers v0
API = Api(61, (0, 0), reads(("topics",), "topics"))


class Reaches(Topics, Security, Transactions, Protocol):
    """What of the broker this module reaches."""


async def _partition(ctx: Request[Reaches], m: Any, info: storage.TopicInfo | None, missing: ErrorCode,
                     index: int) -> Any:
    cluster = ctx.cluster
    partition, error = await cluster.serving_partition(info, missing, index)
    producers: tuple[Any, ...] = ()
    if partition is not None and info is not None:  # a served partition has its topic
        key = (info.stream, info.name, index)
        try:
            await cluster.producers.restore(key, partition)
            txns = await cluster.transactions.partitions.get(*key)
        except storage.StorageError as exc:
            error = storage_error_code(exc)
        else:
            producers = tuple(
                make(m.ProducerState, producer_id=pid, producer_epoch=epoch, last_sequence=seq,
                     last_timestamp=timestamp, coordinator_epoch=coordinator_epoch,
                     current_txn_start_offset=_or_none(txns.first_offset_of(pid)))
                for pid, epoch, seq, timestamp, coordinator_epoch in sorted(cluster.producers.active(key))
            )
    return make(m.PartitionResponse, partition_index=index, error_code=error,
                error_message=None if error == ErrorCode.none else error.name, active_producers=producers)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    topics = []
    for topic in request.topics:
        info, missing = ctx.cluster.authorizer.topic_for(ctx, Operation.READ, topic.name)
        partitions = [await _partition(ctx, m, info, missing, index) for index in topic.partition_indexes]
        topics.append(make(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return make(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _or_none(offset: int | None) -> int:
    return -1 if offset is None else offset
