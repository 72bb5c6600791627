"""The registry's records, kept in each stream's `_schemas` topic so stream replication carries them.

MapR keeps everything a stream needs inside the stream; so is a schema:
the subject `T-value` of topic `/s:T` is written to `/s:_schemas`, and a
replica link copies that topic with the stream's others. Every record is
keyed (`schema/<subject>/<version>`, `config/<subject>`, `mode/<subject>`)
and its JSON value is the whole state of that key (no value: deleted), so
the state is the last record of each key, whatever order streams are read
in, and the topic may be compacted. The registry reads every stream's
`_schemas` from where it stopped before it answers, so what a replica link
brought in (and what another broker of a shared store wrote) is seen.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kafkacompat.protocol.records import Record, build_batch, iter_records
from kafkacompat.storage import TopicExistsError

from ..broker.cluster import SCHEMAS_TOPIC as TOPIC
from ..topic_names import TopicNameError, split_name

if TYPE_CHECKING:
    from kafkacompat.storage import ReadablePartition, Store, TopicInfo

    from ..cluster.membership import PartitionKey

log = logging.getLogger(__name__)
TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}
READ_BYTES = 1 << 20


class SchemaHost(Protocol):
    """What the registry reaches of the broker (the Cluster provides it; produce validation passes its view)."""

    @property
    def store(self) -> Store: ...

    def append_epoch(self, key: PartitionKey) -> int | None: ...

    async def readable_partition(self, stream: str, name: str, index: int) -> ReadablePartition: ...

    async def settle(self, infos: list[TopicInfo]) -> None: ...


def stream_of(subject: str, default_stream: str, exists: Any) -> str:
    """Where a subject is kept: its topic's stream (TopicNameStrategy `T-key`/`T-value`), else the default stream."""
    topic, dash, suffix = subject.rpartition("-")
    if dash and suffix in ("key", "value"):
        try:
            stream, _ = split_name(topic, default_stream)
        except TopicNameError:
            return default_stream
        if exists(stream):
            return stream
    return default_stream


_KINDS = ("schema/", "config/", "mode/")
_FIELDS = {"schema/": {"subject", "version", "id", "schemaType", "schema"}, "config/": {"compatibilityLevel"},
           "mode/": {"mode"}}


def _well_formed(key: str, value: Any) -> bool:
    """Whether a record's value has the fields its kind needs (what the registry reads from it)."""
    kind = next(k for k in _KINDS if key.startswith(k))
    return isinstance(value, dict) and _FIELDS[kind] <= value.keys()


class SchemaLog:
    """The keyed records of every stream's `_schemas` topic, read up to the end on `catch_up`."""

    def __init__(self, cluster: SchemaHost) -> None:
        self.cluster = cluster
        self.records: dict[str, dict[str, Any]] = {}
        self.generation = 0  # counts the records applied: what was derived from `records` is stale when it moved
        self._read_to: dict[tuple[str, bytes], int] = {}  # (stream, topic id) -> next offset
        self._unsynced: list[tuple[Any, int]] = []  # (partition, offset) written, durability not waited for
        self._lock = asyncio.Lock()

    async def catch_up(self) -> bool:
        """Apply what was appended since the last call; True when something changed.

        A `_schemas` read before that is gone (its stream deleted or
        recreated) takes its records with it: the state is read again from
        every stream's beginning.
        """
        async with self._lock:
            found = await self._registry_topics()
            if not self._read_to.keys() <= found.keys():
                self.records.clear()
                self._read_to.clear()
                self.generation += 1
            changed = False
            for key, partition in found.items():
                changed |= await self._read(key, partition)
        return changed

    async def _registry_topics(self) -> dict[tuple[str, bytes], Any]:
        """(stream, topic id) -> partition of every stream's `_schemas` (in a worker of `serve --workers N`
        other than 0, worker 0's, read through it)."""
        store = self.cluster.store
        found = {}
        for stream in store.list_streams():
            info = store.get_topic(stream.path, TOPIC)
            if info is not None:
                found[(stream.path, info.topic_id.bytes)] = await self.cluster.readable_partition(stream.path, TOPIC, 0)
        return found

    async def _read(self, key: tuple[str, bytes], partition: Any) -> bool:
        offset = max(self._read_to.get(key, 0), partition.log_start_offset)
        changed = False
        while offset < partition.high_watermark:
            data = await partition.read(offset, READ_BYTES)
            if not data:
                break
            for record in iter_records(data):
                if record.offset >= offset:
                    self._apply(record)
                    changed = True
                offset = max(offset, record.offset + 1)
        self._read_to[key] = offset
        return changed

    def _apply(self, record: Record) -> None:
        """Take one record into the state; one that is not the registry's is skipped with a warning."""
        try:
            key = record.key.decode() if record.key is not None else ""
            value = None if record.value is None else json.loads(record.value)
            if not key.startswith(_KINDS) or not (value is None or _well_formed(key, value)):
                raise ValueError(f"key {key!r}")
        except ValueError as exc:
            log.warning("skipped a record at offset %d of %s that is not the registry's: %s", record.offset, TOPIC, exc)
            return
        self.generation += 1
        if value is None:
            self.records.pop(key, None)
        else:
            self.records[key] = value

    async def write(self, stream: str, changes: Mapping[str, dict[str, Any] | None]) -> None:
        """Append one batch of keyed records to the stream's `_schemas` and read it back (`durable` waits)."""
        partition = await self._partition(stream)
        now = int(time.time() * 1000)
        records = [Record(key.encode(), None if value is None else json.dumps(value).encode(), [], now)
                   for key, value in changes.items()]
        epoch = self.cluster.append_epoch((stream, TOPIC, 0))
        result = await partition.append(build_batch(records), len(records), leader_epoch=epoch)
        self._unsynced.append((partition, result.last_offset + 1))
        await self.catch_up()

    def written(self) -> list[tuple[Any, int]]:
        """(partition, end offset) of what was written since the last call, for `durable`."""
        waits, self._unsynced = self._unsynced, []
        return waits

    @staticmethod
    async def durable(waits: list[tuple[Any, int]]) -> None:
        """Wait until those writes are durable per their stream's fsync policy."""
        for partition, offset in waits:
            await partition.wait_durable(offset)

    async def _partition(self, stream: str) -> Any:
        store = self.cluster.store
        if store.get_topic(stream, TOPIC) is None:
            try:
                info = await store.create_topic(stream, TOPIC, 1, dict(TOPIC_CONFIGS))
                await self.cluster.settle([info])
            except TopicExistsError:
                pass
        return store.partition(stream, TOPIC, 0)
