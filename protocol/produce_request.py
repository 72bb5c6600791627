"""Produce requests (v0-13) parsed by hand, records left in place as memoryviews.

kio's reader copies every records field out of the frame and builds typed
objects field by field; a produce request is mostly records, so here only
the envelope is read and each partition's records stay a view into the
frame. Attribute names match kio's (acks, transactional_id, topic_data,
name, partition_data, index, records) so handlers read either. From v13
(KIP-516) a topic is named by its id: `topic_id` is set and `name` stays
empty until the handler looks the id up.
tests/test_produce_request.py checks the result against kio's for every
version.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

from .messages import MalformedRequestError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")

FIRST_FLEXIBLE = 9
FIRST_WITH_TRANSACTIONAL_ID = 3
FIRST_WITH_TOPIC_ID = 13
LAST_VERSION = 13


@dataclasses.dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclasses.dataclass(slots=True)
class TopicProduceData:
    name: str
    partition_data: list[PartitionProduceData]
    topic_id: uuid.UUID | None = None  # v13+


@dataclasses.dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


class _Cursor:
    __slots__ = ("view", "pos", "flexible")

    def __init__(self, view: memoryview, pos: int, flexible: bool) -> None:
        self.view, self.pos, self.flexible = view, pos, flexible

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.view):
            raise MalformedRequestError("truncated produce request")

    def uvarint(self) -> int:
        pos = self.pos
        if pos < len(self.view) and self.view[pos] < 0x80:  # nearly every length and count: one byte
            self.pos = pos + 1
            return self.view[pos]
        value = shift = 0
        view = self.view
        while True:
            self.need(1)
            byte = view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise MalformedRequestError("varint too long in produce request")

    def fixed(self, fmt: struct.Struct) -> tuple[int, ...]:
        try:
            values = fmt.unpack_from(self.view, self.pos)
        except struct.error:
            raise MalformedRequestError("truncated produce request") from None
        self.pos += fmt.size
        return values

    def length(self) -> int:
        """An array, string or bytes length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.fixed(_I32)[0]

    def array_length(self, what: str) -> int:
        """A non-nullable array's length, refused when null or longer than the bytes left."""
        count = self.length()
        if count < 0:
            raise MalformedRequestError(f"null {what} array in produce request")
        if count > len(self.view) - self.pos:  # every element takes at least one byte
            raise MalformedRequestError(f"{count} {what} but {len(self.view) - self.pos} bytes left")
        return count

    def string(self) -> str | None:
        size = self.uvarint() - 1 if self.flexible else self.fixed(_I16)[0]
        if size < 0:
            return None
        self.need(size)
        start = self.pos
        self.pos += size
        try:
            return str(self.view[start : self.pos], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRequestError(f"produce request string is not UTF-8: {exc}") from None

    def blob(self) -> memoryview | None:
        size = self.length()
        if size < 0:
            return None
        self.need(size)
        start = self.pos
        self.pos += size
        return self.view[start : self.pos]

    def uuid(self) -> uuid.UUID:
        self.need(16)
        start = self.pos
        self.pos += 16
        return uuid.UUID(bytes=bytes(self.view[start : self.pos]))

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                size = self.uvarint()
                self.need(size)
                self.pos += size


def parse_produce_request(frame: bytes | bytearray | memoryview, offset: int, version: int) -> ProduceRequest:
    """The request body starting at `offset`; MalformedRequestError on bad bytes."""
    if not 0 <= version <= LAST_VERSION:
        raise MalformedRequestError(f"ProduceRequest v{version} is not parsed here (v0-{LAST_VERSION} are)")
    cur = _Cursor(memoryview(frame).cast("B"), offset, version >= FIRST_FLEXIBLE)
    transactional_id = cur.string() if version >= FIRST_WITH_TRANSACTIONAL_ID else None
    acks, timeout_ms = cur.fixed(_ACKS_TIMEOUT)
    topics = []
    for _ in range(cur.array_length("topics")):
        topic_id = cur.uuid() if version >= FIRST_WITH_TOPIC_ID else None
        name = "" if topic_id is not None else cur.string()
        if name is None:
            raise MalformedRequestError("null topic name in produce request")
        partitions = []
        for _ in range(cur.array_length("partitions")):
            (index,) = cur.fixed(_I32)
            partitions.append(PartitionProduceData(index, cur.blob()))
            cur.skip_tagged_fields()
        topics.append(TopicProduceData(name, partitions, topic_id))
        cur.skip_tagged_fields()
    cur.skip_tagged_fields()
    if cur.pos != len(cur.view):
        raise MalformedRequestError(f"{len(cur.view) - cur.pos} trailing bytes after the produce request")
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)
