"""Whole stored batches cut from bytes read off a partition, for the source and the destination alike.

Why a module of its own: the link (engine.py) and the receiver (receiver.py) both cut batches; kept in
either, it made the other import it back (an import circle).
"""

from __future__ import annotations

from kafkacompat.storage import batch_format as bf


def split_batches(data: bytes | memoryview) -> list[tuple[int, memoryview]]:
    """(base offset, bytes) of each whole batch in `data`; a cut-off tail is left out."""
    view = memoryview(data).cast("B")
    out = []
    pos = 0
    while len(view) - pos >= bf.HEADER_SIZE:
        header = bf.parse_header(view, pos)
        if pos + header.size > len(view):
            break
        out.append((header.base_offset, view[pos:pos + header.size]))
        pos += header.size
    return out
