"""Metadata response topics (API key 3, v0-12) encoded by hand, for answers about many topics.

With a million topics, a Metadata request for all of them took about a
minute, two thirds of it building a kio entity per topic and partition and
writing it through kio's generic writer (issue 32); clients time out long
before that. Here an entry is packed with struct from plain values, a few
microseconds a topic. The envelope around the entries is still kio's
(kafkacompat/handlers/slices.py). tests/test_metadata_response.py checks
the bytes against kio's for every version.

Layout of a MetadataResponseTopic by version: error_code and name always
(name nullable from v12); topic_id from v10; is_internal from v1;
partitions, each error_code, partition_index, leader_id, leader_epoch
(v7+), replica_nodes, isr_nodes and offline_replicas (v5+);
topic_authorized_operations from v8. v9 and later are flexible: compact
strings and arrays, and an empty tagged-field section after each partition
and each topic.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from .varints import uvarint

FLEXIBLE_FROM = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NO_TAGS = b"\x00"
_ZERO_ID = bytes(16)
_NO_INTS = {False: _I32.pack(0), True: uvarint(1)}  # an empty array, by flexible


class PartitionRoute(NamedTuple):
    """One MetadataResponsePartition."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int] = ()


def _ints(values: Sequence[int], flexible: bool) -> bytes:
    if not values:
        return _NO_INTS[flexible]
    length = uvarint(len(values) + 1) if flexible else _I32.pack(len(values))
    return length + (_I32.pack(values[0]) if len(values) == 1 else struct.pack(f">{len(values)}i", *values))


def _partition(version: int, flexible: bool, route: PartitionRoute) -> bytes:
    head = struct.pack(">hiii", route.error_code, route.partition_index, route.leader_id, route.leader_epoch) if version >= 7 \
        else struct.pack(">hii", route.error_code, route.partition_index, route.leader_id)
    parts = [head, _ints(route.replica_nodes, flexible), _ints(route.isr_nodes, flexible)]
    if version >= 5:
        parts.append(_ints(route.offline_replicas, flexible))
    if flexible:
        parts.append(_NO_TAGS)
    return b"".join(parts)


def _name(name: str | None, version: int, flexible: bool) -> bytes:
    if name is None:
        if version < 12:
            raise ValueError(f"Metadata v{version}: a topic name may be null from v12 only")
        return uvarint(0)
    data = name.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def encode_topic(
    version: int,
    error_code: int,
    name: str | None,
    topic_id: uuid.UUID | None,
    is_internal: bool,
    partitions: Sequence[PartitionRoute],
    authorized_operations: int,
) -> bytes:
    """One MetadataResponseTopic of response version `version`: the bytes kio writes for it."""
    if not 0 <= version <= 12:
        raise ValueError(f"Metadata v{version} is not encoded here (v0-12 are)")
    flexible = version >= FLEXIBLE_FROM
    parts = [_I16.pack(error_code), _name(name, version, flexible)]
    if version >= 10:
        parts.append(topic_id.bytes if topic_id is not None else _ZERO_ID)
    if version >= 1:
        parts.append(b"\x01" if is_internal else b"\x00")
    parts.append(uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
    parts.extend(_partition(version, flexible, route) for route in partitions)
    if version >= 8:
        parts.append(_I32.pack(authorized_operations))
    if flexible:
        parts.append(_NO_TAGS)
    return b"".join(parts)
