"""DescribeLogDirs: the store's volumes as Kafka's log dirs, with each partition's bytes on them.

A partition's partitionlets may sit on several volumes, so a partition is
listed under every volume holding some of it, with the bytes it has there;
a partition with no data yet is listed under the first volume, where it
starts. total_bytes and usable_bytes are the file system's (-1 for a memory
store), as `kafka-log-dirs --describe` prints them.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from typing import Any

from kafkacompat import storage

from ..broker.cluster import TopicError
from .common import NO_THROTTLE, ErrorCode, make, schema_of

# volume -> topic name -> partition -> bytes
Usage = dict[str, dict[str, dict[int, int]]]


def _wanted(ctx: Any, request: Any) -> list[tuple[str, storage.TopicInfo, list[int]]]:
    cluster = ctx.cluster
    if request.topics is None:
        return [(cluster.listed_name(info.stream, info.name, ctx.client_software_name), info, list(range(info.partitions)))
                for info in cluster.store.list_topics()]
    wanted = []
    for topic in request.topics:
        try:
            info = cluster.lookup(topic.topic).info
        except TopicError:
            continue
        if info is not None:
            wanted.append((topic.topic, info, [p for p in topic.partitions if 0 <= p < info.partitions]))
    return wanted


async def _usage(ctx: Any, request: Any) -> Usage:
    store = ctx.cluster.store
    home = store.data_dirs()[0]
    usage: Usage = defaultdict(lambda: defaultdict(dict))
    for name, info, partitions in _wanted(ctx, request):
        for index in partitions:
            by_volume: dict[str, int] = defaultdict(int)
            for piece in await store.partition(info.stream, info.name, index).partitionlets():
                by_volume[piece.volume] += piece.size_bytes
            for volume, size in (by_volume or {home: 0}).items():
                usage[volume][name][index] = size
    return usage


def _space(path: str) -> tuple[int, int]:
    if not os.path.isdir(path):
        return -1, -1
    total, _used, free = shutil.disk_usage(path)
    return total, free


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    usage = await _usage(ctx, request)
    results = []
    for volume in ctx.cluster.store.data_dirs():
        total, usable = _space(volume)
        topics = tuple(
            make(m.DescribeLogDirsTopic, name=name, partitions=tuple(
                make(m.DescribeLogDirsPartition, partition_index=index, partition_size=size, offset_lag=0,
                     is_future_key=False)
                for index, size in sorted(parts.items())))
            for name, parts in sorted(usage.get(volume, {}).items())
        )
        results.append(make(m.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=volume, topics=topics,
                            total_bytes=total, usable_bytes=usable))
    return make(m.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=tuple(results))
