"""What the transactional handlers share: topic resolution and Kafka's fencing error by version."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Request, Security, Topics
from ..transactions.metadata import PartitionKey
from .common import ErrorCode


class Resolves(Topics, Security, Protocol):
    """What resolving a transaction's partitions reaches: topics, behind the authorizer."""


def fenced_as(version: int, since: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED for clients that know it (`since` and later), else INVALID_PRODUCER_EPOCH, as Kafka answers."""
    if error == ErrorCode.producer_fenced and version < since:
        return ErrorCode.invalid_producer_epoch
    return error


def resolve_partitions(
    ctx: Request[Resolves], topics: Any
) -> tuple[dict[tuple[str, int], PartitionKey], dict[tuple[str, int], ErrorCode]]:
    """(name, index) -> partition key for known partitions, and the errors for unknown or unwritable ones."""
    found: dict[tuple[str, int], PartitionKey] = {}
    missing: dict[tuple[str, int], ErrorCode] = {}
    for topic in topics:
        info, error = ctx.cluster.authorizer.topic_for(ctx, Operation.WRITE, topic.name)
        for index in topic.partitions:
            if info is None or not 0 <= index < info.partitions:
                missing[topic.name, index] = error if info is None else ErrorCode.unknown_topic_or_partition
            else:
                found[topic.name, index] = (info.stream, info.name, index)
    return found, missing
