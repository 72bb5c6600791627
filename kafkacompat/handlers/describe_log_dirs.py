"""DescribeLogDirs: the store's volumes as Kafka's log dirs, with each partition's bytes on them.

A partition's partitionlets may sit on several volumes, so a partition is
listed under every volume holding some of it, with the bytes it has there;
a partition with no data yet is listed under its log dir if one was chosen
(AlterReplicaLogDirs), else under the first volume, where it starts. While
a partition is being moved to its log dir, what is there already is its
"future" replica (is_future_key), as Kafka shows a move, with offset_lag the
offsets still to move; the rest is the current replica. total_bytes and usable_bytes are the file system's (-1 for a memory
store), as `kafka-log-dirs --describe` prints them.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from typing import Any

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..services import Request, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeLogDirs v1-4
API = Api(35, (1, 4), reads())

# volume -> topic name -> partition -> (bytes, offset lag, is future)
Usage = dict[str, dict[str, dict[int, tuple[int, int, bool]]]]


def _wanted(ctx: Request[Topics], request: Any) -> list[tuple[str, storage.TopicInfo, list[int]]]:
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


async def _usage(ctx: Request[Topics], request: Any) -> Usage:
    store = ctx.cluster.store
    home = store.data_dirs()[0]
    usage: Usage = defaultdict(lambda: defaultdict(dict))
    for name, info, partitions in _wanted(ctx, request):
        for index in partitions:
            partition = store.partition(info.stream, info.name, index)
            pieces = await partition.partitionlets()
            target = partition.log_dir()
            by_volume: dict[str, int] = defaultdict(int)
            for piece in pieces:
                by_volume[piece.volume] += piece.size_bytes
            if not by_volume:
                by_volume[target or home] = 0
            away = [piece for piece in pieces if piece.volume != target]
            lag = 0
            if target is not None and away:
                by_volume.setdefault(target, 0)
                lag = sum(piece.next_offset - piece.base_offset for piece in away)
            for volume, size in by_volume.items():
                future = target is not None and bool(away) and volume == target
                usage[volume][name][index] = (size, lag if future else 0, future)
    return usage


def _space(path: str) -> tuple[int, int]:
    if not os.path.isdir(path):
        return -1, -1
    total, _used, free = shutil.disk_usage(path)
    return total, free


async def handle(ctx: Request[Topics], request: Any) -> Any:
    m = schema_of(ctx)
    usage = await _usage(ctx, request)
    results = []
    for volume in ctx.cluster.store.data_dirs():
        total, usable = _space(volume)
        topics = tuple(
            make(m.DescribeLogDirsTopic, name=name, partitions=tuple(
                make(m.DescribeLogDirsPartition, partition_index=index, partition_size=size, offset_lag=lag,
                     is_future_key=future)
                for index, (size, lag, future) in sorted(parts.items())))
            for name, parts in sorted(usage.get(volume, {}).items())
        )
        results.append(make(m.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=volume, topics=topics,
                            total_bytes=total, usable_bytes=usable))
    return make(m.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=tuple(results))
