"""Unsigned varints: the lengths and counts of flexible (compact) encodings."""

from __future__ import annotations


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
