"""DeleteRecords: advance a partition's log start offset (-1 = high watermark)."""

from __future__ import annotations

from typing import Any

import storage

from ..cluster import TopicError
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    topics = []
    for topic in request.topics:
        try:
            info = cluster.lookup(topic.name).info
            missing = ErrorCode.unknown_topic_or_partition
        except TopicError as exc:
            info, missing = None, exc.code
        parts = []
        for part in topic.partitions:
            error, low = ErrorCode.none, -1
            if info is None or not 0 <= part.partition_index < info.partitions:
                error = missing
            else:
                partition = cluster.store.partition(info.stream, info.name, part.partition_index)
                target = partition.high_watermark if part.offset == -1 else part.offset
                if not 0 <= target <= partition.high_watermark:
                    error = ErrorCode.offset_out_of_range
                else:
                    try:
                        low = await partition.delete_records(target)
                    except storage.StorageError as exc:
                        error = storage_error_code(exc)
            parts.append(
                make(m.DeleteRecordsPartitionResult, partition_index=part.partition_index, low_watermark=low, error_code=error)
            )
        topics.append(make(m.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(parts)))
    return make(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
