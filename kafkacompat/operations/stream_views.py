"""Streams, topics, partitions and cursors as the JSON the admin API answers.

The admin command line renders these for people, and prints them as they
are with --json, so field names are the user-facing vocabulary: sizes in
bytes, times in epoch milliseconds, offsets as Kafka reports them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from kafkacompat.storage import (
    Cursor,
    FsyncPolicy,
    PermissionEntries,
    ReadablePartition,
    StorageError,
    StreamInfo,
    StreamPolicy,
    TopicInfo,
)

from ..security.permissions import ExpressionError
from ..security.permissions import check as check_expression
from ..topic_names import canonical_name, kafka_alias


class PartitionReader(Protocol):
    """Where views read partitions: the broker's Cluster (its store's partitions, and another worker's
    through that worker)."""

    @property
    def default_stream(self) -> str: ...

    async def readable_partition(self, stream: str, name: str, index: int) -> ReadablePartition: ...


# Stream policy fields a user may set, with the JSON type each takes.
POLICY_FIELDS: dict[str, type] = {
    "ttl_seconds": int,
    "default_partitions": int,
    "autocreate": bool,
    "fsync": str,
    "partitionlet_bytes": int,
    "cleanup_policy": str,
}
PERMISSION_FIELDS = tuple(f.name for f in dataclasses.fields(PermissionEntries))


class PolicyFieldError(ValueError):
    """A policy change naming an unknown field or carrying the wrong type."""


def policy_with(base: StreamPolicy, changes: dict[str, Any]) -> StreamPolicy:
    """`base` with the fields named in `changes` replaced (the store checks ranges)."""
    values: dict[str, Any] = {}
    for name, value in changes.items():
        if name == "permissions":
            values["permissions"] = _permissions_with(base.permissions, value)
            continue
        kind = POLICY_FIELDS.get(name)
        if kind is None:
            raise PolicyFieldError(f"unknown stream policy field {name!r}")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise PolicyFieldError(f"stream policy field {name!r} must be {kind.__name__}, got {value!r}")
        values[name] = value
    return dataclasses.replace(base, **values)


def _permissions_with(base: PermissionEntries, changes: Any) -> PermissionEntries:
    if not isinstance(changes, dict):
        raise PolicyFieldError("permissions must be an object")
    for name, value in changes.items():
        if name not in PERMISSION_FIELDS:
            raise PolicyFieldError(f"unknown permission {name!r} (known: {', '.join(PERMISSION_FIELDS)})")
        if not isinstance(value, str):
            raise PolicyFieldError(f"permission {name!r} must be a string, got {value!r}")
        try:
            check_expression(value)
        except ExpressionError as exc:
            raise PolicyFieldError(f"permission {name!r}: {exc}") from None
    return dataclasses.replace(base, **changes)


def stream_view(info: StreamInfo) -> dict[str, Any]:
    policy = info.policy
    return {
        "path": info.path,
        "ttl_seconds": policy.ttl_seconds,
        "default_partitions": policy.default_partitions,
        "autocreate": policy.autocreate,
        "fsync": FsyncPolicy(policy.fsync).value,
        "partitionlet_bytes": policy.partitionlet_bytes,
        "cleanup_policy": policy.cleanup_policy,
        "permissions": dataclasses.asdict(policy.permissions),
        "created_ms": info.created_ms,
        "topics": info.topic_count,
    }


def topic_names_view(info: TopicInfo, default_stream: str) -> dict[str, Any]:
    """Every spelling of a topic's name."""
    return {
        "name": canonical_name(info.stream, info.name, default_stream),
        "stream": info.stream,
        "topic": info.name,
        "kafka_name": kafka_alias(info.stream, info.name, default_stream),
    }


async def partition_view(index: int, partition: ReadablePartition) -> dict[str, Any]:
    lets = await partition.partitionlets()
    start, end = partition.log_start_offset, partition.high_watermark
    return {
        "partition": index,
        "log_start_offset": start,
        "high_watermark": end,
        "messages": end - start,
        "size_bytes": sum(p.size_bytes for p in lets),
        "partitionlets": [
            {
                "base_offset": p.base_offset,
                "next_offset": p.next_offset,
                "size_bytes": p.size_bytes,
                "volume": p.volume,
                "sealed": p.sealed,
            }
            for p in lets
        ],
    }


async def topic_view(reader: PartitionReader, info: TopicInfo, detail: bool) -> dict[str, Any]:
    """A topic with totals; `detail` adds each partition and its partitionlets. A partition that cannot
    be read (its worker of `serve --workers N` restarting, its files unreadable) is left out of the
    totals and listed in `unreadable` with the reason."""
    partitions, unreadable = [], {}
    for i in range(info.partitions):
        try:
            partitions.append(await partition_view(i, await reader.readable_partition(info.stream, info.name, i)))
        except StorageError as exc:
            unreadable[i] = str(exc)
    view = topic_names_view(info, reader.default_stream)
    view.update(
        topic_id=str(info.topic_id),
        partitions=info.partitions,
        messages=sum(p["messages"] for p in partitions),
        size_bytes=sum(p["size_bytes"] for p in partitions),
        configs=dict(info.configs),
        created_ms=info.created_ms,
    )
    if unreadable:
        view["unreadable"] = unreadable
    if detail:
        view["partition_detail"] = partitions
    return view


async def cursor_view(reader: PartitionReader, stream: str, group: str, cursor: Cursor) -> dict[str, Any]:
    """A committed offset with its lag behind the partition's end (None if the topic is gone or the
    partition cannot be read)."""
    end = None
    try:
        end = (await reader.readable_partition(stream, cursor.topic, cursor.partition)).high_watermark
    except StorageError:
        pass
    return {
        "group": group,
        "topic": cursor.topic,
        "partition": cursor.partition,
        "offset": cursor.offset,
        "end_offset": end,
        "lag": None if end is None else max(end - cursor.offset, 0),
        "metadata": cursor.metadata,
        "commit_time_ms": cursor.commit_time_ms,
    }
