"""Produce responses (v3-13) packed by hand: one per produce request, so kept cheap.

kio builds typed objects for every partition and writes them field by
field; a producer sends one request per batch of partitions, so that cost
is paid per request on the hottest path. tests/test_produce_response.py
checks the bytes against kio's for every version.

Layout by version: log_start_offset from v5, record_errors and
error_message from v8, compact encodings and tagged fields from v9, from
v10 (KIP-951) a refused partition's current leader (partition tag 0) and
that leader's address (response tag 0), so a producer goes to the new
leader without asking Metadata first; the topic's id in place of its name
from v13 (KIP-516).
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Sequence

from .varints import uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset


@dataclasses.dataclass(slots=True)
class PartitionResult:
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (record index, why), v8+
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch) for a refused partition, v10+


@dataclasses.dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A broker a partition's current_leader names, v10+."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def _string(out: bytearray, text: str | None, flexible: bool) -> None:
    if text is None:
        out += b"\x00" if flexible else _I16.pack(-1)
        return
    data = text.encode()
    out += uvarint(len(data) + 1) if flexible else _I16.pack(len(data))
    out += data


def _tagged(out: bytearray, fields: list[tuple[int, bytes]]) -> None:
    out += uvarint(len(fields))
    for tag, data in fields:
        out += uvarint(tag) + uvarint(len(data)) + data


def _node_endpoints(nodes: Sequence[NodeEndpoint]) -> bytes:
    out = bytearray(uvarint(len(nodes) + 1))
    for node in nodes:
        out += _I32.pack(node.node_id)
        _string(out, node.host, True)
        out += _I32.pack(node.port)
        _string(out, node.rack, True)
        out.append(0)
    return bytes(out)


def encode_produce_response(
    version: int, topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResult]]], throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> bytes:
    """The response body for (topic, partition results) pairs: the topic by name, or by id from v13."""
    if not 3 <= version <= 13:
        raise ValueError(f"Produce v{version} is not encoded here (v3-13 are)")
    flexible = version >= 9
    out = bytearray(uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for topic, parts in topics:
        if isinstance(topic, uuid.UUID):
            out += topic.bytes
        else:
            _string(out, topic, flexible)
        out += uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            if version >= 5:
                out += _PART_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            else:
                out += _PART_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 8:
                errors = p.record_errors
                out += uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors))
                for index, why in errors:
                    out += _I32.pack(index)
                    _string(out, why, flexible)
                    if flexible:
                        out.append(0)  # record error tagged fields
                _string(out, p.error_message, flexible)
            if version >= 10 and p.current_leader is not None:
                _tagged(out, [(0, _I32.pack(p.current_leader[0]) + _I32.pack(p.current_leader[1]) + b"\x00")])
            elif flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    out += _I32.pack(throttle_time_ms)
    if version >= 10 and node_endpoints:
        _tagged(out, [(0, _node_endpoints(node_endpoints))])
    elif flexible:
        out.append(0)  # response tagged fields
    return bytes(out)
