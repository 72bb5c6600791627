"""Produce responses (v3-13) packed by hand: one per produce request, so kept cheap.

kio builds typed objects for every partition and writes them field by
field; a producer sends one request per batch of partitions, so that cost
is paid per request on the hottest path. tests/test_produce_response.py
checks the bytes against kio's for every version.

Layout by version: log_start_offset from v5, record_errors and
error_message from v8, compact encodings and tagged fields from v9 (no
tagged field is ever set: current_leader and node_endpoints stay at their
defaults), the topic's id in place of its name from v13 (KIP-516).
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


def _string(out: bytearray, text: str | None, flexible: bool) -> None:
    if text is None:
        out += b"\x00" if flexible else _I16.pack(-1)
        return
    data = text.encode()
    out += uvarint(len(data) + 1) if flexible else _I16.pack(len(data))
    out += data


def encode_produce_response(
    version: int, topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResult]]], throttle_time_ms: int = 0
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
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)  # response tagged fields
    return bytes(out)
