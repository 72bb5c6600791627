"""Streams, topics, partitions and cursors as the JSON the admin API answers.

The admin command line renders these for people, and prints them as they
are with --json, so field names are the user-facing vocabulary: sizes in
bytes, times in epoch milliseconds, offsets as Kafka reports them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from kafkacompat.storage import (
    Cursor,
    FsyncPolicy,
    PartitionFigures,
    PermissionEntries,
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

    async def partition_figures(self, keys: Sequence[tuple[str, str, int]], partitionlets: bool
                                ) -> dict[tuple[str, str, int], PartitionFigures | StorageError]: ...


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


def partition_view(index: int, figures: PartitionFigures) -> dict[str, Any]:
    start, end, lets = figures.log_start_offset, figures.high_watermark, figures.partitionlets
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
    return (await topic_views(reader, [info], detail))[0]


async def topic_views(reader: PartitionReader, infos: list[TopicInfo], detail: bool) -> list[dict[str, Any]]:
    """`topic_view` of each topic, their partitions' figures read in one go."""
    figures = await reader.partition_figures([(info.stream, info.name, i) for info in infos
                                              for i in range(info.partitions)], partitionlets=True)
    return [_topic_view(reader.default_stream, info, detail, figures) for info in infos]


def _topic_view(default_stream: str, info: TopicInfo, detail: bool,
                figures: dict[tuple[str, str, int], PartitionFigures | StorageError]) -> dict[str, Any]:
    partitions, unreadable = [], {}
    for i in range(info.partitions):
        found = figures[info.stream, info.name, i]
        if isinstance(found, StorageError):
            unreadable[i] = str(found)
        else:
            partitions.append(partition_view(i, found))
    view = topic_names_view(info, default_stream)
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


async def cursor_views(reader: PartitionReader, cursors: list[tuple[str, str, Cursor]]) -> list[dict[str, Any]]:
    """Committed offsets, each (stream, group, cursor), with their lag behind the partition's end (None if
    the topic is gone or the partition cannot be read); the ends read in one go."""
    ends = await reader.partition_figures(sorted({(stream, c.topic, c.partition) for stream, _, c in cursors}),
                                          partitionlets=False)
    views = []
    for stream, group, cursor in cursors:
        found = ends[stream, cursor.topic, cursor.partition]
        views.append(_cursor_view(group, cursor, None if isinstance(found, StorageError) else found.high_watermark))
    return views


def _cursor_view(group: str, cursor: Cursor, end: int | None) -> dict[str, Any]:
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
