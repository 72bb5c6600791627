"""Helpers the group handlers share: timeouts in ms, the client's address, per-partition answers."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat.protocol.messages import make

from ..services import Request
from .common import NO_THROTTLE, UNSET_OPERATIONS


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(ctx: Request[object]) -> str:
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


def protocol_off(m: Any, response: type, group_ids: Any) -> Any:
    """A ConsumerGroupDescribe or ShareGroupDescribe answer while its protocol's feature
    (group.version, share.version) is 0: every group UNSUPPORTED_VERSION, as Kafka answers."""
    return make(response, throttle_time=NO_THROTTLE, groups=tuple(
        make(m.DescribedGroup, error_code=ErrorCode.unsupported_version, error_message=None, group_id=group_id,
             group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
             authorized_operations=UNSET_OPERATIONS) for group_id in group_ids))
