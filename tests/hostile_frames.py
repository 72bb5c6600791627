"""Hand-built hostile requests shared by the protocol and broker tests."""

from __future__ import annotations

import struct

from kafkacompat.protocol.varints import uvarint


def create_partitions_207gb() -> bytes:
    """The 36-byte CreatePartitions v2 frame (size prefix included) that aborted the broker.

    One topic, one assignment whose broker_ids array claims 25,875,000,000
    int32s: kio reserved 8 bytes per element (207 GB) before reading any.
    """
    client_id = b"hostile!"
    header = struct.pack(">hhih", 37, 2, 7, len(client_id)) + client_id + b"\x00"
    body = uvarint(2) + uvarint(2) + b"t" + struct.pack(">i", 3) + uvarint(2) + uvarint(25_875_000_000 + 1)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def create_topics_null_topics(version: int = 7) -> bytes:
    """CreateTopics whose non-nullable `topics` array has length -1 (a frame, size included)."""
    header = struct.pack(">hhih", 19, version, 8, 1) + b"x" + (b"\x00" if version >= 5 else b"")
    if version >= 5:
        body = uvarint(0) + struct.pack(">i?", 1000, False) + b"\x00"  # compact null, timeout, validate
    else:
        body = struct.pack(">ii?", -1, 1000, False)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload
