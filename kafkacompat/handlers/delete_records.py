"""DeleteRecords: advance a partition's log start offset (-1 = high watermark)."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..security.acls import Operation
from ..services import Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, changes

# DeleteRecords v0-2
API = Api(21, (0, 2), changes(("topics",), "topics"))


class Reaches(Topics, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    topics = []
    for topic in request.topics:
        info, missing = cluster.authorizer.topic_for(ctx, Operation.DELETE, topic.name)
        parts = []
        for part in topic.partitions:
            low = -1
            partition, error = await cluster.serving_partition(info, missing, part.partition_index)
            if partition is not None:
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
