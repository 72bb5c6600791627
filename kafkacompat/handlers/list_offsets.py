"""ListOffsets: -2 earliest, -1 latest, -3 max timestamp, T >= 0 by time.

As Kafka 4.1 answers them: -3 from v7, -4 (earliest local: here every
offset is local, so the log start offset) from v8, -5 (latest tiered: no
tiered storage, so -1 with no error) from v9. Any other negative timestamp,
or one older than its version, gets UNSUPPORTED_VERSION.

With read_committed (isolation level 1, v2+) "latest" is the last stable
offset, as on Kafka: a consumer starting at the end never lands inside an
open transaction.
"""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..security.acls import Operation
from ..services import Placement, Request, Security, Topics, Transactions
from ..transactions import PartitionTxns
from .common import NO_THROTTLE, ErrorCode, leader_epoch_error, make, schema_of, storage_error_code
from .registry import Api, reads

# ListOffsets v1-10
API = Api(2, (1, 10), reads(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Transactions, Protocol):
    """What of the broker this module reaches."""

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
# special timestamp -> the first ListOffsets version that defines it
FIRST_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
READ_COMMITTED = 1


async def _lookup(partition: storage.Partition, timestamp: int, txns: PartitionTxns | None,
                  leader_epoch: int) -> tuple[int, int, int]:
    """(timestamp, offset, epoch) per Kafka: -1/-1/-1 when no record is at or after T; `txns` for read_committed.

    `leader_epoch` is the epoch Metadata names, answered for -2, -4 and -1;
    a hit by timestamp or max timestamp answers its batch's epoch instead
    (Kafka's FileRecords.searchForTimestamp, RecordBatch.offsetOfMaxTimestamp;
    -1 when the batch has none), never one above Metadata's (see `handle`),
    and a miss Kafka's default -1.
    """
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, partition.log_start_offset, leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp == LATEST:
        return -1, partition.high_watermark if txns is None else txns.last_stable_offset, leader_epoch
    if timestamp == MAX_TIMESTAMP:
        hit = await partition.max_timestamp()
    else:
        hit = await partition.offset_for_timestamp(timestamp)
    if hit is None:
        return -1, -1, -1
    return hit.timestamp, hit.offset, min(hit.leader_epoch, leader_epoch) if hit.leader_epoch >= 0 else -1


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in request.topics:
        info, missing = cluster.authorizer.topic_for(ctx, Operation.DESCRIBE, topic.name)
        parts = []
        for part in topic.partitions:
            ts, offset, epoch = -1, -1, -1
            partition, error = await cluster.serving_partition(info, missing, part.partition_index)
            if partition is not None and part.timestamp < 0 and FIRST_VERSION.get(part.timestamp, 99) > ctx.version:
                error = ErrorCode.unsupported_version
            elif partition is not None and info is not None:  # a served partition has its topic
                # the epoch Metadata names (in a cluster, the leader table's; else the store's): Java's
                # consumer takes it as the partition's last seen epoch and from then on ignores Metadata
                # naming an older one, so one above Metadata's would hide every later leader from it
                leader_epoch = cluster.leader_epoch(info, part.partition_index, partition)
                epoch = -1 if part.timestamp == LATEST_TIERED else leader_epoch
                error = leader_epoch_error(leader_epoch, getattr(part, "current_leader_epoch", -1))
                if error == ErrorCode.none:
                    try:
                        txns = None
                        if committed and part.timestamp == LATEST and info is not None:
                            txns = await cluster.transactions.partitions.get(info.stream, info.name,
                                                                              part.partition_index)
                        ts, offset, epoch = await _lookup(partition, part.timestamp, txns, leader_epoch)
                    except storage.StorageError as exc:
                        error = storage_error_code(exc)
            parts.append(
                make(
                    m.ListOffsetsPartitionResponse,
                    partition_index=part.partition_index,
                    error_code=error,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(make(m.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(parts)))
    return make(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
