"""`consume` without --group: partitions read with Metadata, ListOffsets and Fetch, and no consumer group at all.

librdkafka's consumer always carries a group.id and asks for that group's
coordinator (FindCoordinator) even when it only assigns partitions and
never commits, so a user allowed to read a topic but no group was refused
GROUP_AUTHORIZATION_FAILED for a group it never meant to use, and the
broker's audit log filled with refusals (kcat, on librdkafka's legacy
consumer, reads the same topic fine). This consumer asks for nothing but
the topic: it speaks the three APIs over the command line's own
connections (client.connect: TLS and SASL from --command-config), at
versions every Kafka 2.x+ broker serves, and offers what `consume` uses of
confluent-kafka's Consumer (list_topics, assign, consume, close) so the
command's loop is the same with or without a group.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import sys
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType

from kafkacompat.protocol.messages import encode_body, make, request_schema
from kafkacompat.protocol.records import iter_records, whole_batches
from kafkacompat.protocol.versions import schema

from ..frames import FrameError, read_frame
from ..security.client import ClientSecurity
from .client import connect, parse_bootstrap
from .kafka_client import CommandError

METADATA, LIST_OFFSETS, FETCH = (3, 8), (2, 5), (1, 11)  # non-flexible: a plain request header
EARLIEST, LATEST = -2, -1  # confluent-kafka's OFFSET_BEGINNING and OFFSET_END, and ListOffsets' timestamps
FETCH_BYTES = 1 << 20  # per partition and request, as librdkafka's fetch.message.max.bytes
_MAX_ANSWER = 256 * 1024 * 1024
_CLIENT_ID = b"kafkacompat-cli"


class GrouplessError:
    """A Kafka error as confluent-kafka's KafkaError shows it (name and text), for describe_error."""

    def __init__(self, code: int) -> None:
        self._code = ErrorCode(code)

    def code(self) -> int:
        return int(self._code.value)

    def name(self) -> str:
        return self._code.name.upper()

    def str(self) -> str:
        return self.name()


@dataclasses.dataclass(frozen=True)
class GrouplessMessage:
    """One record, or a partition's error, shaped as confluent-kafka's Message."""

    _topic: str
    _partition: int
    _offset: int = -1
    _timestamp: int = -1
    _key: bytes | None = None
    _value: bytes | None = None
    _headers: list[tuple[str, bytes | None]] | None = None
    _error: GrouplessError | None = None

    def error(self) -> GrouplessError | None:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp  # (TIMESTAMP_CREATE_TIME, ms): `consume` prints the second

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers


class GrouplessConsumer:
    """Reads assigned partitions from their leaders; holds positions in memory only (nothing is committed)."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None, timeout: float) -> None:
        self._security, self._timeout = security, timeout
        self._bootstrap = connect(parse_bootstrap(bootstrap), timeout, security)
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._connections: dict[int, socket.socket] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._pending: list[GrouplessMessage] = []  # fetched, not yet handed out
        self._correlation = 0

    def list_topics(self, topic: str, timeout: float | None = None) -> Any:
        """Metadata of one topic, shaped as confluent-kafka's ClusterMetadata (.topics[name].partitions, .error)."""
        topics = (make(_nested(METADATA, "MetadataRequestTopic"), name=topic),)
        answer = self._ask(self._bootstrap, METADATA, topics=topics, allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        self._brokers.update({b.node_id: (b.host, b.port) for b in answer.brokers})
        shaped = {}
        for t in answer.topics:
            for p in t.partitions:
                self._leaders[(t.name, p.partition_index)] = p.leader_id
            error = GrouplessError(t.error_code) if t.error_code else None
            shaped[t.name] = _Namespace(error=error, partitions={p.partition_index: p for p in t.partitions})
        return _Namespace(topics=shaped)

    def assign(self, partitions: list[Any]) -> None:
        """Start each partition at its offset, or at its earliest or latest (EARLIEST, LATEST) one."""
        for tp in partitions:
            offset = tp.offset
            if offset in (EARLIEST, LATEST):
                offset = self._list_offset(tp.topic, tp.partition, offset)
            self._positions[(tp.topic, tp.partition)] = offset

    def consume(self, num_messages: int, timeout: float) -> list[GrouplessMessage]:
        """Up to `num_messages` records from the assigned partitions, waiting up to `timeout` s for some."""
        if not self._pending:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for key in self._positions:
                by_leader.setdefault(self._leaders[key], []).append(key)
            wait = timeout / max(len(by_leader), 1)
            for leader, keys in sorted(by_leader.items()):
                self._pending.extend(self._fetch(leader, keys, wait))
        out, self._pending = self._pending[:num_messages], self._pending[num_messages:]
        return out

    def close(self) -> None:
        for sock in (self._bootstrap, *self._connections.values()):
            sock.close()

    def _fetch(self, leader: int, keys: list[tuple[str, int]], wait: float) -> list[GrouplessMessage]:
        topics: dict[str, list[Any]] = {}
        for topic, partition in keys:
            topics.setdefault(topic, []).append(make(_nested(FETCH, "FetchPartition"), partition=partition,
                                                     fetch_offset=self._positions[(topic, partition)],
                                                     partition_max_bytes=FETCH_BYTES))
        answer = self._ask(self._connection(leader), FETCH, replica_id=-1, min_bytes=1,
                           max_wait=datetime.timedelta(seconds=wait), max_bytes=FETCH_BYTES * len(keys),
                           isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                           topics=tuple(make(_nested(FETCH, "FetchTopic"), topic=t, partitions=tuple(ps))
                                        for t, ps in topics.items()))
        if answer.error_code:
            return [GrouplessMessage(keys[0][0], keys[0][1], _error=GrouplessError(answer.error_code))]
        out = []
        for response in answer.responses:
            for data in response.partitions:
                out.extend(self._records(response.topic, data))
        return out

    def _records(self, topic: str, data: Any) -> list[GrouplessMessage]:
        """The partition's records past its position (a batch may start before it); the position moves past them."""
        key = (topic, data.partition_index)
        if data.error_code:  # at the position it was asked for, as librdkafka reports a partition's error
            return [GrouplessMessage(topic, data.partition_index, self._positions[key],
                                     _error=GrouplessError(data.error_code))]
        records, position = data.records or b"", self._positions[key]
        out = [GrouplessMessage(topic, data.partition_index, r.offset, r.timestamp, r.key, r.value,
                                list(r.headers)) for r in iter_records(records) if r.offset >= position]
        for header in whole_batches(records):  # control batches move the position too
            position = max(position, header.last_offset + 1)
        self._positions[key] = position
        return out

    def _list_offset(self, topic: str, partition: int, which: int) -> int:
        part = make(_nested(LIST_OFFSETS, "ListOffsetsPartition"), partition_index=partition, timestamp=which)
        answer = self._ask(self._connection(self._leaders[(topic, partition)]), LIST_OFFSETS, replica_id=-1,
                           isolation_level=0, topics=(make(_nested(LIST_OFFSETS, "ListOffsetsTopic"), name=topic,
                                                           partitions=(part,)),))
        (found,) = answer.topics[0].partitions
        if found.error_code:
            raise CommandError(f"cannot read {topic}-{partition}: {GrouplessError(found.error_code).name()}")
        return found.offset

    def _connection(self, node: int) -> socket.socket:
        if node not in self._connections:
            self._connections[node] = connect([self._brokers[node]], self._timeout, self._security)
        return self._connections[node]

    def _ask(self, sock: socket.socket, api: tuple[int, int], **values: Any) -> Any:
        """One request and its decoded answer over a connection of this consumer."""
        self._correlation += 1
        body = encode_body(make(request_schema(*api), **values))
        head = api[0].to_bytes(2, "big") + api[1].to_bytes(2, "big") + self._correlation.to_bytes(4, "big")
        frame = head + len(_CLIENT_ID).to_bytes(2, "big") + _CLIENT_ID + body
        try:
            sock.sendall(len(frame).to_bytes(4, "big") + frame)
            answer, _ = entity_reader(schema(*api, EntityType.response))(read_frame(sock, _MAX_ANSWER), 4)
        except (OSError, FrameError) as exc:
            raise CommandError(f"lost the connection to the broker: {exc}") from None
        return answer


@dataclasses.dataclass
class _Namespace:
    error: Any = None
    partitions: dict[int, Any] = dataclasses.field(default_factory=dict)
    topics: dict[str, Any] = dataclasses.field(default_factory=dict)


def _nested(api: tuple[int, int], name: str) -> type:
    """A nested entity class of an API's request at the version this consumer speaks."""
    return getattr(sys.modules[request_schema(*api).__module__], name)
