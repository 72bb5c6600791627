"""TxnOffsetCommit: a group's offsets staged in a transaction, visible only once it commits.

Group membership is checked as for OffsetCommit when the client names its
generation (v3+, KIP-447); generation -1 skips it, as Kafka does for
transactional commits. From v5 (transactions v2) the client sends no
AddOffsetsToTxn: the group joins the transaction here, as Kafka's group
coordinator adds its offsets partition before writing.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import partition_errors
from .registry import Api, changes
from .txn_common import fenced_as

# TxnOffsetCommit v0-5: v5 adds the group to the transaction (KIP-890 part 2)
API = Api(28, (0, 5), changes(("topics",), "topics"))


class Reaches(Topics, Security, Groups, Transactions, Settings, Placement, Protocol):
    """What of the broker this module reaches."""

FENCED_FROM = 3
IMPLICIT_ADD_FROM = 5


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    errors: dict[tuple[str, int], ErrorCode] = {}
    staged: list[tuple[tuple[str, int], tuple[str, str, int, int, int, str]]] = []
    authorizer = cluster.authorizer
    refusal: ErrorCode | None = (ErrorCode.transactional_id_authorization_failed
               if not authorizer.transactional_id(ctx, Operation.WRITE, request.transactional_id)
               else ErrorCode.group_authorization_failed
               if not authorizer.group(ctx, Operation.READ, request.group_id) else None)
    topic_refusal: ErrorCode | None
    for topic in request.topics:
        info, _ = cluster.topic_for(topic.name)
        if refusal is None and not authorizer.topic(ctx, Operation.READ, topic.name):
            topic_refusal = ErrorCode.topic_authorization_failed
        else:
            topic_refusal = refusal
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            if topic_refusal is not None:  # Kafka refuses the whole request for the id or the group
                errors[key] = topic_refusal
            elif info is None or not 0 <= part.partition_index < info.partitions:
                errors[key] = ErrorCode.unknown_topic_or_partition
            elif len(part.committed_metadata or "") > cluster.config.offset_metadata_max_bytes:
                errors[key] = ErrorCode.offset_metadata_too_large
            else:
                staged.append((key, (info.stream, info.name, part.partition_index, part.committed_offset,
                                     getattr(part, "committed_leader_epoch", -1), part.committed_metadata or "")))
    if staged:
        generation = getattr(request, "generation_id", -1)
        error = await cluster.coordinator_error(request.group_id)  # the group's coordinator stages its offsets
        if error == ErrorCode.none and generation >= 0:
            error = cluster.groups.validate_commit(
                request.group_id, generation, request.member_id, request.group_instance_id, ctx.version,
                transactional=True,
            )
        if error == ErrorCode.none and ctx.version >= IMPLICIT_ADD_FROM:
            error = await cluster.transactions.add_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, 2)
            if error == ErrorCode.producer_fenced:  # as Kafka's verification of the offsets partition answers
                error = ErrorCode.invalid_producer_epoch
        if error == ErrorCode.none:
            error = await cluster.transactions.stage_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
                [row for _, row in staged],
            )
        for key, _ in staged:
            errors[key] = fenced_as(ctx.version, FENCED_FROM, error)
    topics = partition_errors(m.TxnOffsetCommitResponseTopic, m.TxnOffsetCommitResponsePartition,
                              request.topics, errors)
    return make(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
