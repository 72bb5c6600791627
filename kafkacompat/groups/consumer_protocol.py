"""Reading the "consumer" protocol's subscription bytes (ConsumerProtocolSubscription).

The coordinator relays member metadata untouched; only OffsetDelete and
offset expiry need to know which topics a consumer group subscribes to.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of one member's subscription; None when the bytes do not parse."""
    try:
        pos = _I16.size  # version; every version starts with the topic list
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
