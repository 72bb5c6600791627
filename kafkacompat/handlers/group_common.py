"""Helpers the group handlers share: timeouts in ms, the client's address, per-partition answers."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat.protocol.messages import make


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(ctx: Any) -> str:
    """"/127.0.0.1", as Kafka prints a member's InetAddress."""
    host = ctx.peer.rpartition(":")[0] or ctx.peer
    return "/" + host.strip("[]")


def partition_errors(
    topic_cls: type, partition_cls: type, topics: Any, errors: dict[tuple[str, int], ErrorCode]
) -> tuple[Any, ...]:
    """The request's topics and partitions echoed back, each with its error code."""
    return tuple(
        make(
            topic_cls,
            name=topic.name,
            partitions=tuple(
                make(partition_cls, partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
                for p in topic.partitions
            ),
        )
        for topic in topics
    )
