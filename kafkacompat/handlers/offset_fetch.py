"""OffsetFetch: a group's committed offsets (v8+ asks for several groups at once).

Partitions without a committed offset answer -1 with no error, as Kafka
does; topics=null returns every cursor of the group across all streams,
named as Metadata names the topics. With require_stable (v7+, sent by
read_committed consumers) a partition whose offset is staged in an open
transaction answers UNSTABLE_OFFSET_COMMIT, and the client retries. In a
cluster only the group's coordinator answers (others NOT_COORDINATOR, as on
Kafka): another broker's copy of the offsets may lag the coordinator's
commits, and a client still asking the old coordinator after a hand-over
read an offset lower than one it had committed (chaos, cloud, seed 4).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol

from ..broker.cluster import TopicError
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Topics, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# OffsetFetch v1-9: v8+ batches groups
API = Api(9, (1, 9), reads(("groups",), "groups", older=(8, reads(("topics",), "topics"))))


class Reaches(Topics, Placement, Security, Groups, Transactions, Protocol):
    """What of the broker this module reaches."""

# (name, [(partition, offset, leader epoch, metadata, error)])
TopicOffsets = list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]
_UNSTABLE = (-1, -1, "", ErrorCode.unstable_offset_commit)


def _requested(ctx: Request[Reaches], group_id: str, topics: Any, unstable: set[tuple[str, str, int]]) -> TopicOffsets:
    cluster = ctx.cluster
    out: TopicOffsets = []
    for topic in topics:
        if not cluster.authorizer.topic(ctx, Operation.DESCRIBE, topic.name):
            out.append((topic.name, [(index, -1, -1, "", ErrorCode.topic_authorization_failed)
                                     for index in topic.partition_indexes]))
            continue
        try:
            resolved = cluster.lookup(topic.name)
            cursors = cluster.groups.offsets.lookup(group_id, resolved.stream, resolved.topic, topic.partition_indexes)
        except TopicError:
            resolved, cursors = None, {}
        rows = []
        for index in topic.partition_indexes:
            c = cursors.get(index)
            if resolved is not None and (resolved.stream, resolved.topic, index) in unstable:
                rows.append((index, *_UNSTABLE))
            else:
                rows.append((index, c.offset, c.leader_epoch, c.metadata, ErrorCode.none) if c
                            else (index, -1, -1, "", ErrorCode.none))
        out.append((topic.name, rows))
    return out


def _everything(ctx: Request[Reaches], group_id: str, unstable: set[tuple[str, str, int]]) -> TopicOffsets:
    cluster = ctx.cluster
    by_topic: dict[str, list[tuple[int, int, int, str, ErrorCode]]] = defaultdict(list)
    authorizer = cluster.authorizer
    for stream, c in cluster.groups.offsets.all(group_id):
        if authorizer.enabled and not authorizer.known_topic(ctx, Operation.DESCRIBE, stream, c.topic,
                                                             log_denied=False):
            continue  # every topic means every topic the principal may describe
        name = cluster.listed_name(stream, c.topic, ctx.client_software_name)
        if (stream, c.topic, c.partition) in unstable:
            by_topic[name].append((c.partition, *_UNSTABLE))
        else:
            by_topic[name].append((c.partition, c.offset, c.leader_epoch, c.metadata, ErrorCode.none))
    return [(name, sorted(rows)) for name, rows in sorted(by_topic.items())]


def _offsets(ctx: Request[Reaches], group_id: str, topics: Any, require_stable: bool) -> TopicOffsets:
    unstable = ctx.cluster.transactions.pending_offsets(group_id) if require_stable else set()
    if topics is None:
        return _everything(ctx, group_id, unstable)
    return _requested(ctx, group_id, topics, unstable)


def _topics(m: Any, topic_cls: str, part_cls: str, offsets: TopicOffsets) -> tuple[Any, ...]:
    return tuple(
        make(
            getattr(m, topic_cls),
            name=name,
            partitions=tuple(
                make(
                    getattr(m, part_cls),
                    partition_index=index,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                    error_code=error,
                )
                for index, offset, epoch, metadata, error in rows
            ),
        )
        for name, rows in offsets
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.version < 8:
        if not ctx.cluster.authorizer.group(ctx, Operation.DESCRIBE, request.group_id):
            return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=(),
                        error_code=ErrorCode.group_authorization_failed)
        refused = await ctx.cluster.coordinator_error(request.group_id)  # the group moved: the client looks it up again
        if refused is not ErrorCode.none:
            return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=(), error_code=refused)
        offsets = _offsets(ctx, request.group_id, request.topics, getattr(request, "require_stable", False))
        return make(
            m.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(m, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", offsets),
            error_code=ErrorCode.none,
        )
    groups = []
    for group in request.groups:
        # v9: a consumer-protocol member names itself and its epoch; a stale one gets no offsets
        if not ctx.cluster.authorizer.group(ctx, Operation.DESCRIBE, group.group_id):
            error = ErrorCode.group_authorization_failed
        else:  # unless the group moved
            error = await ctx.cluster.coordinator_error(group.group_id)
            member = (group.group_id, getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
            if error == ErrorCode.none:
                error = ctx.cluster.groups.consumer.validate_fetch(*member)
            if error == ErrorCode.none:
                error = ctx.cluster.groups.streams.validate_fetch(*member)
        offsets = (_offsets(ctx, group.group_id, group.topics, request.require_stable)
                   if error == ErrorCode.none else [])
        groups.append(
            make(
                m.OffsetFetchResponseGroup,
                group_id=group.group_id,
                topics=_topics(m, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", offsets),
                error_code=error,
            )
        )
    return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
