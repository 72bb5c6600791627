"""Unsigned varints: the lengths and counts of flexible (compact) encodings."""

from __future__ import annotations

_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]  # most lengths and counts: no loop, no new object
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
