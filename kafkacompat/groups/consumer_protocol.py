"""The "consumer" embedded protocol: ConsumerProtocolSubscription and ConsumerProtocolAssignment bytes.

Classic groups relay member metadata untouched; OffsetDelete and offset
expiry read which topics a group subscribes to, and a consumer (KIP-848)
group that serves classic members reads their subscriptions and writes
their assignments, as Kafka's ConsumerProtocol does. Each blob starts with
its version (int16); a version newer than kio knows is read with the newest
known schema, as Kafka reads it.
"""

from __future__ import annotations

import dataclasses
import io
import struct

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment as AssignmentV0
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment as AssignmentV3
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription as SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription as SubscriptionV1
from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription as SubscriptionV2
from kio.schema.consumer_protocol_subscription.v3.data import ConsumerProtocolSubscription as SubscriptionV3
from kio.serial import entity_reader, entity_writer

CONSUMER_PROTOCOL_TYPE = "consumer"

_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)
_ASSIGNMENT_V0_WRITER = entity_writer(AssignmentV0)


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # v1+: what the member still owns (cooperative rebalancing)
    rack_id: str | None


def parse_subscription(metadata: bytes) -> Subscription | None:
    """A member's subscription; None when the bytes do not parse."""
    try:
        (version,) = _VERSION.unpack_from(metadata, 0)
        if version < 0:
            return None
        schema = _SUBSCRIPTIONS[min(version, len(_SUBSCRIPTIONS) - 1)]
        value, _ = entity_reader(schema)(memoryview(metadata), _VERSION.size)
    except Exception:  # noqa: BLE001 - any malformed blob is "does not parse"
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in getattr(value, "owned_partitions", ()):
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return Subscription(tuple(value.topics), owned, getattr(value, "rack_id", None))


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of one member's subscription; None when the bytes do not parse."""
    subscription = parse_subscription(metadata)
    return None if subscription is None else set(subscription.topics)


def parse_assignment(data: bytes) -> dict[str, frozenset[int]] | None:
    """A classic member's assignment (from SyncGroup); None when the bytes do not parse."""
    if not data:
        return {}
    try:
        (version,) = _VERSION.unpack_from(data, 0)
        schema = AssignmentV0 if version == 0 else AssignmentV3
        value, _ = entity_reader(schema)(memoryview(data), _VERSION.size)
    except Exception:  # noqa: BLE001 - any malformed blob is "does not parse"
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in value.assigned_partitions:
        out[tp.topic] = out.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return out


def encode_assignment(partitions: dict[str, frozenset[int]]) -> bytes:
    """ConsumerProtocolAssignment v0, which every client version reads."""
    value = AssignmentV0(
        assigned_partitions=tuple(
            AssignedTopic(topic=topic, partitions=tuple(sorted(parts))) for topic, parts in sorted(partitions.items())
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(0))
    _ASSIGNMENT_V0_WRITER(buffer, value)
    return buffer.getvalue()


_SUBSCRIPTION_V0_WRITER = entity_writer(SubscriptionV0)


def encode_subscription(topics: list[str] | tuple[str, ...]) -> bytes:
    """ConsumerProtocolSubscription v0 (topics, no user data): what an in-process member joins with."""
    buffer = io.BytesIO()
    buffer.write(_VERSION.pack(0))
    _SUBSCRIPTION_V0_WRITER(buffer, SubscriptionV0(topics=tuple(sorted(topics)), user_data=None))
    return buffer.getvalue()
