"""Topic entries of Metadata (key 3, v0-12) and DescribeTopicPartitions (key 75, v0) answers, encoded by hand.

With a million topics, a Metadata request for all of them took about a
minute, two thirds of it building a kio entity per topic and partition and
writing it through kio's generic writer (issue 32); clients time out long
before that. Paging through them with DescribeTopicPartitions paid the same
per topic. Here an entry is packed with struct from plain values, a few
microseconds a topic. The envelope around the entries is still kio's
(kafkacompat/handlers/slices.py). tests/protocol/test_topic_entries.py
checks the bytes against kio's for every version.

A MetadataResponseTopic by version: error_code and name always (name
nullable from v12); topic_id from v10; is_internal from v1; partitions,
each error_code, partition_index, leader_id, leader_epoch (v7+),
replica_nodes, isr_nodes and offline_replicas (v5+);
topic_authorized_operations from v8. v9 and later are flexible: compact
strings and arrays, and an empty tagged-field section after each partition
and each topic. A DescribeTopicPartitionsResponseTopic (v0, flexible) is a
Metadata v12 topic whose partitions carry two more (nullable) arrays
between isr_nodes and offline_replicas: eligible_leader_replicas and
last_known_elr.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from .varints import uvarint

METADATA, DESCRIBE_TOPIC_PARTITIONS = 3, 75
FLEXIBLE_FROM = 9  # Metadata's first flexible version

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NO_TAGS = b"\x00"
_ZERO_ID = bytes(16)
_NO_INTS = {False: _I32.pack(0), True: uvarint(1)}  # an empty array, by flexible
_NULL_COMPACT = uvarint(0)


class PartitionRoute(NamedTuple):
    """One partition of a topic entry."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int] = ()
    eligible_leader_replicas: Sequence[int] | None = ()  # DescribeTopicPartitions only
    last_known_elr: Sequence[int] | None = ()  # DescribeTopicPartitions only


def _ints(values: Sequence[int] | None, flexible: bool) -> bytes:
    if values is None:
        return _NULL_COMPACT  # nullable arrays are all in flexible versions
    if not values:
        return _NO_INTS[flexible]
    length = uvarint(len(values) + 1) if flexible else _I32.pack(len(values))
    return length + (_I32.pack(values[0]) if len(values) == 1 else struct.pack(f">{len(values)}i", *values))


def _partition(version: int, flexible: bool, route: PartitionRoute, elr: bool) -> bytes:
    head = struct.pack(">hiii", route.error_code, route.partition_index, route.leader_id, route.leader_epoch) \
        if version >= 7 else struct.pack(">hii", route.error_code, route.partition_index, route.leader_id)
    parts = [head, _ints(route.replica_nodes, flexible), _ints(route.isr_nodes, flexible)]
    if elr:
        parts += [_ints(route.eligible_leader_replicas, True), _ints(route.last_known_elr, True)]
    if version >= 5:
        parts.append(_ints(route.offline_replicas, flexible))
    if flexible:
        parts.append(_NO_TAGS)
    return b"".join(parts)


def _name(name: str | None, nullable: bool, flexible: bool) -> bytes:
    if name is None:
        if not nullable:
            raise ValueError("a topic name may be null from Metadata v12 only")
        return _NULL_COMPACT
    data = name.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _topic(version: int, elr: bool, error_code: int, name: str | None, topic_id: uuid.UUID | None,
           is_internal: bool, partitions: Sequence[PartitionRoute], authorized_operations: int) -> bytes:
    """A topic entry in Metadata's layout of `version` (DescribeTopicPartitions: v12's, with `elr`)."""
    flexible = version >= FLEXIBLE_FROM
    parts = [_I16.pack(error_code), _name(name, version >= 12, flexible)]
    if version >= 10:
        parts.append(topic_id.bytes if topic_id is not None else _ZERO_ID)
    if version >= 1:
        parts.append(b"\x01" if is_internal else b"\x00")
    parts.append(uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
    parts.extend(_partition(version, flexible, route, elr) for route in partitions)
    if version >= 8:
        parts.append(_I32.pack(authorized_operations))
    if flexible:
        parts.append(_NO_TAGS)
    return b"".join(parts)


def encode_topic_entry(
    api_key: int,
    version: int,
    error_code: int,
    name: str | None,
    topic_id: uuid.UUID | None,
    is_internal: bool,
    partitions: Sequence[PartitionRoute],
    authorized_operations: int,
) -> bytes:
    """One topic entry of a Metadata or DescribeTopicPartitions response of `version`: the bytes kio writes for it."""
    if api_key == METADATA and 0 <= version <= 12:
        layout, elr = version, False
    elif api_key == DESCRIBE_TOPIC_PARTITIONS and version == 0:
        layout, elr = 12, True
    else:
        raise ValueError(f"API {api_key} v{version} is not encoded here (Metadata v0-12 and "
                         "DescribeTopicPartitions v0 are)")
    return _topic(layout, elr, error_code, name, topic_id, is_internal, partitions, authorized_operations)
