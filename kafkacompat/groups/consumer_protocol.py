"""The topics a consumer subscribes to, read from its JoinGroup metadata.

The broker otherwise relays member metadata as opaque bytes; Kafka reads
the subscription only to know which topics a "consumer" group uses
(OffsetDelete refuses those, offset expiry spares them).
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topic names of a ConsumerProtocolSubscription (v0-3), or None if unreadable."""
    try:
        pos = 2  # version; every version starts with the topic array
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = []
        for _ in range(count):
            (size,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.append(metadata[pos : pos + size].decode("utf-8"))
            pos += size
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None
