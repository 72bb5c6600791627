"""Validating stored batches after an unclean stop.

A batch is kept only if its header is whole, its magic is 2, its base
offset is the one expected next (offsets are dense; a partitionlet the log
cleaner rewrote may skip offsets but never go back), it fits in the file
and its CRC-32C matches. The first batch failing any check ends the valid
log: everything from there on is a torn or damaged tail.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from .. import batch_format as bf

log = logging.getLogger(__name__)

CHUNK = 4 << 20


class Span(NamedTuple):
    """Where one valid batch sits and what its header says."""

    pos: int
    base: int
    size: int
    last: int
    max_ts: int
    epoch: int
    attributes: int


def valid_batches(
    fd: int, start: int, end: int, expected_next: int, label: str, dense: bool = True
) -> Iterator[Span]:
    """Yield the valid batches in [start, end) of a log file, stopping at the first bad one."""
    pos = start
    buf = b""
    buf_start = start
    while pos < end:
        rel = pos - buf_start
        if rel + bf.HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(CHUNK, end - pos), pos)
            buf_start, rel = pos, 0
        if len(buf) - rel < bf.HEADER_SIZE:
            log.warning("%s: torn batch header at byte %d; log ends there", label, pos)
            return
        base, length, epoch, magic, crc, attrs, lod, _bts, max_ts, *_ = bf.HEADER.unpack_from(buf, rel)
        size = length + bf.LOG_OVERHEAD
        if magic != bf.MAGIC or length < bf.HEADER_SIZE - bf.LOG_OVERHEAD or lod < 0:
            log.warning("%s: malformed batch header at byte %d; log ends there", label, pos)
            return
        if base != expected_next and (dense or base < expected_next):
            log.warning("%s: batch at byte %d has offset %d, expected %d; log ends there", label, pos, base,
                        expected_next)
            return
        if pos + size > end:
            log.warning("%s: batch at byte %d is torn (%d of %d bytes); log ends there", label, pos, end - pos, size)
            return
        if rel + size > len(buf):
            buf = os.pread(fd, max(size, min(CHUNK, end - pos)), pos)
            buf_start, rel = pos, 0
        if crc32c.crc32c(memoryview(buf)[rel + bf.CRC_START : rel + size]) != crc:
            log.warning("%s: batch at byte %d (offset %d) fails its CRC-32C; log ends there", label, pos, base)
            return
        yield Span(pos, base, size, base + lod, max_ts, epoch, attrs)
        expected_next = base + lod + 1
        pos += size
