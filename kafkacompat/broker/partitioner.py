"""Kafka's default key partitioner: murmur2 of the key bytes, as the Java client does.

The REST proxy and the test broker's produce helper place keyed records
where Java's and kafka-python's producers would, so records of one key
land in one partition whichever way they come in.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Java's Utils.murmur2 as an unsigned 32-bit value."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    if tail:
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Java's default partitioner picks for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
