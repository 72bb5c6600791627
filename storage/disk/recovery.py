"""Checking stored batches: after an unclean stop, on open and in the background.

A batch is valid if its header is whole, its magic is 2, its base offset is
not below the one expected next (offsets are dense; a jump is a range lost
to earlier damage), it fits in the file and its CRC-32C matches.

A batch failing a check is not the end of the log: a flipped byte in the
middle of a partitionlet must not cost the batches after it, nor let their
offsets be handed out again. The scan looks for the next valid batch past
the damage (a header with magic 2, a plausible length and offset and a
matching CRC) and reports the bytes and offsets in between as a `Hole`. Only
when nothing valid follows is the rest a torn or damaged tail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from .. import batch_format as bf

CHUNK = 4 << 20
_MAGIC_AT = 16  # byte of the magic within a batch
_MIN_LENGTH = bf.HEADER_SIZE - bf.LOG_OVERHEAD
_MIN_RECORD = 7  # bytes: length, attributes, timestamp and offset deltas, key, value, header count


class Span(NamedTuple):
    """Where one valid batch sits and what its header says."""

    pos: int
    base: int
    size: int
    last: int
    max_ts: int
    epoch: int
    attributes: int


class Hole(NamedTuple):
    """Damaged bytes [pos, end) holding offsets [first, resume); valid data resumes at both.

    `end == -1` means nothing valid follows: the rest of the file is a torn
    or damaged tail, and `resume` is -1 (the caller knows where offsets go on).
    """

    pos: int
    end: int
    first: int
    resume: int
    reason: str


def scan(
    fd: int, start: int, end: int, expected_next: int, offset_limit: int | None = None, dense: bool = True,
    known: Sequence[tuple[int, int]] = (),
) -> Iterator[Span | Hole]:
    """Yield the valid batches of [start, end) and a Hole for each damaged stretch.

    `offset_limit` (one past the last offset the file may hold, when known)
    keeps a resynchronisation from trusting a batch with an impossible offset.
    A partitionlet that is not `dense` (rewritten by a log cleaner) may skip
    offsets forward: such a jump is neither damage nor a hole. Nor is a jump
    over `known` ranges (offsets quarantined before, as [first, resume)):
    the batches written after a quarantine follow it by design.
    """
    reader = _Reader(fd, end)
    pos = start
    while pos < end:
        problem, span = _check_at(reader, pos, end, expected_next, offset_limit)
        if problem is None and span.base > expected_next and dense and not covered(
                known, expected_next, span.base) and not _plausible(reader, span, end, expected_next, 0,
                                                                    offset_limit):
            problem = f"batch at byte {pos} has offset {span.base}, expected {expected_next}"
        if problem is None:
            if span.base > expected_next and dense:  # a range lost before (a quarantined gap): zero bytes
                yield Hole(pos, pos, expected_next, span.base, f"offsets {expected_next}..{span.base - 1} are missing")
            yield span
            expected_next = span.last + 1
            pos += span.size
            continue
        found = _resync(reader, pos + 1, end, expected_next, offset_limit)
        if found is None:
            yield Hole(pos, -1, expected_next, -1, problem)
            return
        yield Hole(pos, found.pos, expected_next, found.base, problem)
        yield found
        expected_next = found.last + 1
        pos = found.pos + found.size


def covered(known: Sequence[tuple[int, int]], first: int, resume: int) -> bool:
    """Whether every offset of [first, resume) lies in one of the `known` quarantined ranges."""
    for low, high in sorted(known):
        if low <= first < high:
            first = high
            if first >= resume:
                return True
    return False


class _Reader:
    """Buffered preads of one file."""

    def __init__(self, fd: int, end: int) -> None:
        self.fd = fd
        self.end = end
        self.buf = b""
        self.start = 0

    def view(self, pos: int, size: int) -> memoryview | None:
        """`size` bytes at pos, or None if the file ends first."""
        rel = pos - self.start
        if rel < 0 or rel + size > len(self.buf):
            self.buf = os.pread(self.fd, max(size, min(CHUNK, self.end - pos)), pos)
            self.start, rel = pos, 0
            if len(self.buf) < size:
                return None
        return memoryview(self.buf)[rel : rel + size]


def _check_at(
    reader: _Reader, pos: int, end: int, expected_next: int, offset_limit: int | None
) -> tuple[str | None, Span | None]:
    """(None, span) for a valid batch at pos, or (what is wrong, None)."""
    head = reader.view(pos, bf.HEADER_SIZE) if end - pos >= bf.HEADER_SIZE else None
    if head is None:
        return f"torn batch header at byte {pos}", None
    base, length, epoch, magic, crc, attrs, lod, _bts, max_ts, *_ = bf.HEADER.unpack_from(head)
    size = length + bf.LOG_OVERHEAD
    if magic != bf.MAGIC or length < _MIN_LENGTH or lod < 0:
        return f"malformed batch header at byte {pos}", None
    if base < expected_next or (offset_limit is not None and base + lod >= offset_limit):
        return f"batch at byte {pos} has offset {base}, expected {expected_next}", None
    if pos + size > end:
        return f"batch at byte {pos} is torn ({end - pos} of {size} bytes)", None
    body = reader.view(pos, size)
    if body is None or crc32c.crc32c(body[bf.CRC_START:]) != crc:
        return f"batch at byte {pos} (offset {base}) fails its CRC-32C", None
    return None, Span(pos, base, size, base + lod, max_ts, epoch, attrs)


def _resync(reader: _Reader, pos: int, end: int, expected_next: int, offset_limit: int | None) -> Span | None:
    """The first valid batch at or after pos (a header whose magic, offsets and CRC hold)."""
    start = pos - 1  # where the damage begins
    while pos + bf.HEADER_SIZE <= end:
        chunk_end = min(pos + CHUNK, end)
        buf = os.pread(reader.fd, chunk_end - pos + bf.HEADER_SIZE, pos)
        i = buf.find(b"\x02", _MAGIC_AT)
        while i != -1 and pos + i - _MAGIC_AT < chunk_end:
            cand = pos + i - _MAGIC_AT
            problem, span = _check_at(reader, cand, end, expected_next, offset_limit)
            if problem is None and _plausible(reader, span, end, expected_next, cand - start, offset_limit):
                return span
            i = buf.find(b"\x02", i + 1)
        pos = chunk_end
    return None


def _plausible(reader: _Reader, span: Span, end: int, expected_next: int, damaged_bytes: int,
               offset_limit: int | None) -> bool:
    """Whether a batch whose offset jumps past the expected one can be trusted.

    The base offset lies outside the CRC, so a flipped byte there yields an
    intact-looking batch with a wrong offset. A jump is trusted when the next
    batch continues right after it, or, for the last batch, when it stays
    below a known limit or within what the damaged bytes could have held
    (a record takes at least 7 bytes).
    """
    if span.base == expected_next:
        return True
    after = span.pos + span.size
    if after + bf.HEADER_SIZE <= end:
        head = reader.view(after, bf.HEADER_SIZE)
        return head is not None and bf.HEADER.unpack_from(head)[0] == span.last + 1
    if offset_limit is not None:
        return span.last < offset_limit
    return span.base - expected_next <= damaged_bytes // _MIN_RECORD + 1 and damaged_bytes > 0


def resync(fd: int, pos: int, end: int, expected_next: int, offset_limit: int | None = None) -> Span | None:
    """The first valid batch in [pos, end) with an offset >= expected_next, if any."""
    return _resync(_Reader(fd, end), pos, end, expected_next, offset_limit)
