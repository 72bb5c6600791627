"""DescribeProducers: the idempotent producers a partition keeps state for (kafka-transactions describe-producers).

Per producer, as Kafka answers: id, epoch, last sequence, and the max
timestamp of its last batch (read back from the log, so the produce path
keeps nothing extra); no coordinator epoch (-1) and no open transaction
(-1) for idempotent producers. State is rebuilt from the partition's tail
first, as a produce after a restart would.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage
from kafkacompat.protocol.records import HEADER_SIZE, read_header

from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code


async def _last_timestamp(partition: storage.Partition, base_offset: int) -> int:
    try:
        data = await partition.read(base_offset, HEADER_SIZE)
    except storage.StorageError:
        return -1  # the batch was deleted since
    return read_header(data).max_timestamp if len(data) >= HEADER_SIZE else -1


async def _partition(ctx: Any, m: Any, info: Any, missing: ErrorCode, index: int) -> Any:
    cluster = ctx.cluster
    partition, error = cluster.partition_for(info, missing, index)
    producers = []
    if partition is not None:
        key = (info.stream, info.name, index)
        try:
            await cluster.producers.restore(key, partition)
            for producer_id, epoch, last_seq, base_offset in cluster.producers.producers_of(key):
                producers.append(make(
                    m.ProducerState, producer_id=producer_id, producer_epoch=epoch, last_sequence=last_seq,
                    last_timestamp=await _last_timestamp(partition, base_offset), coordinator_epoch=-1,
                    current_txn_start_offset=-1))
        except storage.StorageError as exc:
            error, producers = storage_error_code(exc), []
    return make(m.PartitionResponse, partition_index=index, error_code=error,
                error_message=None if error == ErrorCode.none else error.name, active_producers=tuple(producers))


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    topics = []
    for topic in request.topics:
        info, missing = ctx.cluster.topic_for(topic.name)
        partitions = [await _partition(ctx, m, info, missing, index) for index in topic.partition_indexes]
        topics.append(make(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return make(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
