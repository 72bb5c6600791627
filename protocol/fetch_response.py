"""Fetch responses (v4-17) encoded by hand, so stored records are never copied into them.

kio's writer copies every records field through an io.BytesIO, and the frame
is copied again around it. Here the envelope is packed with struct and the
records buffers are handed on as they are: the result is a list of chunks
for the transport (small records are folded into the envelope, where one
copy is cheaper than another write call). tests/test_fetch_response.py
checks the bytes against kio's for every version.

Layout by version: log_start_offset from v5, error_code and session_id from
v7, preferred_read_replica from v11, compact encodings and tagged fields
from v12, topic ids instead of names from v13. Aborted transactions are
always null (no transactions here) and no tagged field is ever set.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Sequence

from .varints import uvarint

Buffer = bytes | bytearray | memoryview

INLINE_MAX = 16 * 1024  # records up to this size are copied into the envelope

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART_V4 = struct.Struct(">ihqq")  # index, error_code, high_watermark, last_stable_offset
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_NULL_ARRAY = _I32.pack(-1)
_PREFERRED_REPLICA = _I32.pack(-1)


@dataclasses.dataclass(slots=True)
class PartitionAnswer:
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Buffer
    aborted: Sequence[tuple[int, int]] | None = None  # (producer id, first offset) of aborted transactions


def encode_fetch_response(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionAnswer]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[Buffer]:
    """The response body as chunks; `topics` pairs a name (v4-12) or topic id (v13+) with its partitions."""
    if not 4 <= version <= 17:
        raise ValueError(f"Fetch v{version} is not encoded here (v4-17 are)")
    flexible = version >= 12
    chunks: list[Buffer] = []
    out = bytearray()
    if version >= 7:
        out += _TOP_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        out += _I32.pack(throttle_time_ms)
    out += uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    part_head = _PART_V5 if version >= 5 else _PART_V4
    for key, partitions in topics:
        if version >= 13:
            assert isinstance(key, uuid.UUID)
            out += key.bytes
        else:
            name = str(key).encode()
            out += uvarint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name
        out += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if version >= 5:
                out += part_head.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset,
                                      p.log_start_offset)
            else:
                out += part_head.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset)
            if p.aborted is None:
                out += b"\x00" if flexible else _NULL_ARRAY
            else:
                out += uvarint(len(p.aborted) + 1) if flexible else _I32.pack(len(p.aborted))
                for producer_id, first_offset in p.aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)  # aborted transaction tagged fields
            if version >= 11:
                out += _PREFERRED_REPLICA
            size = len(p.records)
            out += uvarint(size + 1) if flexible else _I32.pack(size)
            if size > INLINE_MAX:
                chunks.append(out)
                chunks.append(p.records)
                out = bytearray()
            elif size:
                out += p.records
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields
    chunks.append(out)
    return chunks
