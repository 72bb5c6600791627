"""What the test broker's helpers do on its loop: topics, records and committed offsets, straight on the store.

Broker.produce/consume/create_topic/committed (testing/broker.py) run these
on the broker's event loop: they reach the cluster's store as the broker's
own handlers would (auto-creation, the murmur2 partitioner, LogAppendTime),
without a client, so a test can set up and assert what a client sees.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Mapping

from kafkacompat import storage
from kafkacompat.protocol.records import Record, build_batch, iter_records, set_log_append_time, whole_batches

from ..broker.cluster import Cluster, TopicError
from ..broker.partitioner import partition_for_key
from ..catalog.topic_configs import topic_config_value, validate_configs

Data = bytes | str | None
Headers = Mapping[str, Data] | Iterable[tuple[str, Data]]

_READ_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """A stored record, as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int  # ms since the epoch (LogAppendTime topics: the broker's time)


async def create_topic(cluster: Cluster, name: str, partitions: int, configs: Mapping[str, str] | None) -> str:
    stream, topic = _split(cluster, name)
    validate_configs(dict(configs or {}))
    if cluster.store.get_stream(stream) is None:
        await cluster.store.create_stream(stream)
    info = await cluster.store.create_topic(stream, topic, partitions, dict(configs or {}))
    await cluster.settle([info])  # in a cluster (a postgresql:// store), its partitions get leaders now
    return name

async def delete_topic(cluster: Cluster, name: str) -> None:
    stream, topic = _split(cluster, name)
    info = cluster.store.get_topic(stream, topic)
    if info is None:
        raise storage.UnknownTopicError(f"topic {name} does not exist")
    await cluster.store.delete_topic(stream, topic)
    cluster.forget_topic(info)

async def produce(
    cluster: Cluster,
    topic: str,
    value: Data,
    key: Data,
    headers: Headers | None,
    partition: int | None,
    timestamp: int | None,
) -> Message:
    try:
        info = await cluster.auto_create(topic)
    except TopicError as exc:
        raise ValueError(str(exc)) from None
    key_bytes, value_bytes = _bytes(key), _bytes(value)
    if partition is None:
        partition = 0 if key_bytes is None else partition_for_key(key_bytes, info.partitions)
    if not 0 <= partition < info.partitions:
        raise ValueError(f"topic {topic} has partitions 0-{info.partitions - 1}, not {partition}")
    pairs = tuple((name, _bytes(v)) for name, v in _header_pairs(headers))
    now = int(time.time() * 1000)
    stamp = now if timestamp is None else timestamp
    batch = build_batch([Record(key_bytes, value_bytes, list(pairs), stamp)])
    if topic_config_value(cluster, info, "message.timestamp.type") == "LogAppendTime":
        stamp = now
        batch = set_log_append_time(batch, now)
    result = await cluster.store.partition(info.stream, info.name, partition).append(batch, 1)
    return Message(topic, partition, result.base_offset, key_bytes, value_bytes, pairs, stamp)

async def consume(
    cluster: Cluster,
    topic: str,
    partition: int | None,
    offset: int | str,
    count: int | None,
    timeout: float,
) -> list[Message]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    stream, name = _split(cluster, topic)
    info = cluster.store.get_topic(stream, name)
    while info is None:  # a producer under test may not have created it yet
        if count is None or loop.time() >= deadline:
            raise storage.UnknownTopicError(f"topic {topic} does not exist")
        await asyncio.sleep(0.005)
        info = cluster.store.get_topic(stream, name)
    if partition is not None and not 0 <= partition < info.partitions:
        raise ValueError(f"topic {topic} has partitions 0-{info.partitions - 1}, not {partition}")
    indexes = range(info.partitions) if partition is None else [partition]
    parts = {i: cluster.store.partition(stream, name, i) for i in indexes}
    positions = {i: _start(p, offset) for i, p in parts.items()}
    found: dict[int, list[Message]] = {i: [] for i in parts}
    while True:
        for i, part in parts.items():
            positions[i] = await _read_into(found[i], topic, i, part, positions[i])
        total = sum(len(messages) for messages in found.values())
        if count is None or total >= count:
            return [m for i in parts for m in found[i]]
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError(
                f"expected at least {count} record(s) in {topic} within {timeout:g} s, found {total}"
            )
        waits = [part.wait_for_data(positions[i]) for i, part in parts.items()]
        await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()

async def committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    stream, name = _split(cluster, topic)
    return {c.partition: c.offset for c in cluster.groups.offsets.lookup(group, stream, name).values()}


def _split(cluster: Cluster, name: str) -> tuple[str, str]:
    try:
        return cluster.split(name)
    except TopicError as exc:
        raise ValueError(str(exc)) from None


def _bytes(data: Data) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _header_pairs(headers: Headers | None) -> Iterable[tuple[str, Data]]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


def _start(part: storage.Partition, offset: int | str) -> int:
    if offset == "earliest":
        return part.log_start_offset
    if offset == "latest":
        return part.high_watermark
    if not isinstance(offset, int):
        raise ValueError(f"offset must be an int, 'earliest' or 'latest', not {offset!r}")
    return max(offset, part.log_start_offset)


async def _read_into(
    out: list[Message], topic: str, index: int, part: storage.Partition, position: int
) -> int:
    """Append the records of one partition from `position` on; returns the next position."""
    while position < part.high_watermark:
        data = await part.read(position, _READ_BYTES)
        advanced = False
        for record in iter_records(data):
            if record.offset >= position:
                out.append(Message(
                    topic, index, record.offset, record.key, record.value,
                    tuple(record.headers), record.timestamp,
                ))
                position = record.offset + 1
                advanced = True
        for header in whole_batches(data):  # batches a log cleaner emptied hold offsets but no record
            if header.last_offset >= position:
                position = header.last_offset + 1
                advanced = True
        if not advanced:
            break
    return position
