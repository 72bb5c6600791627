"""OffsetCommit: committed offsets become cursors in each topic's own stream.

Checks follow Kafka: unknown topics or partitions fail per partition,
the group decides the rest (generation fencing, simple consumers with
generation -1), then oversized metadata fails per partition.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.storage import Cursor

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, coordinator_storage_error_code, make, schema_of
from .group_common import partition_errors
from .registry import Api, changes

# OffsetCommit v2-9
API = Api(8, (2, 9), changes(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Groups, Settings, Protocol):
    """What of the broker this module reaches."""

log = logging.getLogger(__name__)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    config = cluster.config
    # (topic name, partition) -> error; cursors to store, keyed the same way
    errors: dict[tuple[str, int], ErrorCode] = {}
    pending: list[tuple[tuple[str, int], str, Cursor]] = []
    too_large: list[tuple[str, int]] = []
    authorizer = cluster.authorizer
    group_allowed = authorizer.group(ctx, Operation.READ, request.group_id)
    for topic in request.topics:
        topic_allowed = group_allowed and authorizer.topic(ctx, Operation.READ, topic.name)
        info, _ = cluster.topic_for(topic.name)  # Kafka answers every miss here as unknown
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            if not group_allowed:  # Kafka refuses every partition of the request
                errors[key] = ErrorCode.group_authorization_failed
                continue
            if not topic_allowed:
                errors[key] = ErrorCode.topic_authorization_failed
                continue
            if info is None or not 0 <= part.partition_index < info.partitions:
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            metadata = part.committed_metadata or ""
            if len(metadata) > config.offset_metadata_max_bytes:  # Kafka counts characters
                too_large.append(key)
                continue
            cursor = Cursor(
                topic=info.name,
                partition=part.partition_index,
                offset=part.committed_offset,
                leader_epoch=getattr(part, "committed_leader_epoch", -1),
                metadata=metadata,
            )
            pending.append((key, info.stream, cursor))
    if pending or too_large:
        refused = await cluster.coordinator_error(request.group_id)  # the group moved: looked up again
        group_error = refused if refused is not ErrorCode.none else cluster.groups.validate_commit(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            ctx.version,
        )
        for key in too_large:
            errors[key] = group_error if group_error != ErrorCode.none else ErrorCode.offset_metadata_too_large
        if group_error != ErrorCode.none:
            for key, _, _ in pending:
                errors[key] = group_error
        elif pending:
            try:
                await cluster.groups.commit(request.group_id, [(stream, c) for _, stream, c in pending])
                outcome = ErrorCode.none
            except storage.StorageError as exc:
                log.warning("committing offsets of group %s failed: %s", request.group_id, exc)
                outcome = coordinator_storage_error_code(exc)
            for key, _, _ in pending:
                errors[key] = outcome
    topics = partition_errors(m.OffsetCommitResponseTopic, m.OffsetCommitResponsePartition, request.topics, errors)
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
