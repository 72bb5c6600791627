"""One partitionlet: a log file of raw batches plus sparse offset and time indexes.

The indexes hold an entry every INDEX_INTERVAL bytes of log: the offset
index maps a batch's base offset to its byte position; the time index maps
the largest timestamp seen so far to the position of the batch where it was
reached. Both are kept in memory (a few bytes per 4 KiB of log) and written
to `.index` / `.timeindex` when the partitionlet is sealed or checkpointed;
a missing or inconsistent index file is rebuilt by scanning the log.

A partitionlet may hold holes: damaged bytes (or none, for offsets lost
with a cut-off tail) whose offsets are quarantined. Walking the log steps
over their bytes; reading an offset inside one raises DamagedRangeError. A
byte position `verified` says how far CRCs were checked since open; reads
past it check the CRCs of what they return.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import struct
import sys
from array import array
from collections.abc import Iterator

import crc32c

from .. import batch_format as bf
from ..errors import CorruptBatchError, DamagedRangeError
from . import layout
from .files import FULL_ERRNOS, unlink_files
from .handles import FileHandles
from .recovery import Hole, resync, scan
from .volumes import Volume

log = logging.getLogger(__name__)

INDEX_INTERVAL = 4096
# baseOffset .. maxTimestamp: what walking the log needs from each header
_WALK = struct.Struct(">qiibIhiqq")
_WALK_CHUNK = 16384


def _pairs_to_bytes(a: array, b: array) -> bytes:
    out = array("q", bytes(16 * len(a)))
    out[0::2] = a
    out[1::2] = b
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def _bytes_to_pairs(data: bytes) -> tuple[array, array]:
    arr = array("q")
    arr.frombytes(data[: len(data) - len(data) % 16])
    if sys.byteorder != "little":
        arr.byteswap()
    return arr[0::2], arr[1::2]


@dataclasses.dataclass(slots=True)
class Recovered:
    """What validating a stretch of log found."""

    epochs: list[tuple[int, int]]  # (leader epoch, base offset) of each epoch change
    holes: list[Hole]  # damaged stretches quarantined (a cut tail is not one)
    cut: Hole | None = None  # the torn or damaged tail, if any
    cut_bytes: int = 0  # bytes truncated away (0 when the tail was kept as a hole)


_FRAME = struct.Struct(">qi4xb")  # a batch's base offset, length and (past the leader epoch) magic
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23  # lastOffsetDelta's place in the batch header (storage/batch_format.py HEADER)


def frame_walk_py(data: bytes | memoryview, pos: int, expected: int) -> tuple[int, int, int]:
    """The header walk of storage/_frame_walk.c, the reference (and where the C module was not built):
    from `pos`, while each header frames a whole magic-2 batch inside `data` whose base offset is
    `expected` (-1: the first one's; the next is its last offset + 1). Returns (pos, expected, base):
    stopped at the end (base -1), at a batch whose base is not the one expected (its base), or where the
    bytes frame no batch (base -1)."""
    view = memoryview(data)
    size = len(view)
    while 0 <= pos < size:
        if size - pos < bf.HEADER_SIZE:
            break
        first, length, magic = _FRAME.unpack_from(view, pos)
        if magic != bf.MAGIC or length < bf.HEADER_SIZE - bf.LOG_OVERHEAD or length > size - pos - bf.LOG_OVERHEAD:
            break
        if expected >= 0 and first != expected:
            return pos, expected, first
        expected = first + _LAST_DELTA.unpack_from(view, pos + _LAST_DELTA_AT)[0] + 1
        pos += bf.LOG_OVERHEAD + length
    return pos, expected, -1


try:  # the same walk in C (storage/_frame_walk.c), built when the package is installed
    from .._frame_walk import frame_walk as _frame_walk
except ImportError:
    _frame_walk = frame_walk_py


class Partitionlet:
    __slots__ = (
        "directory", "volume", "base", "handles", "stem", "log_path", "sealed", "next_offset", "size", "max_ts", "max_ts_offset",
        "created_ms", "holes", "verified", "missing", "dense", "generation", "clean_to", "cleaned_ms", "tombstones",
        "_off", "_pos", "_tval", "_tpos", "_since_index",
    )

    def __init__(
        self, directory: str, volume: Volume, base: int, handles: FileHandles, *, sealed: bool, next_offset: int,
        size: int, max_ts: int, max_ts_offset: int, created_ms: int, generation: int = 0,
        clean_to: int | None = None, cleaned_ms: int = 0, tombstones: int = 0,
    ) -> None:
        self.directory = directory
        self.volume = volume
        self.base = base
        self.handles = handles
        self.stem = layout.partitionlet_stem(directory, base, generation)
        self.log_path = self.stem + layout.LOG_SUFFIX
        self.sealed = sealed
        self.next_offset = next_offset
        self.size = size
        self.max_ts = max_ts
        self.max_ts_offset = max_ts_offset
        self.created_ms = created_ms
        self.holes: list[tuple[int, int, int, int]] = []  # (first, resume offset, pos, end pos), by offset
        self.verified = 0  # bytes from the start whose CRCs were checked since open
        self.missing = False  # the log file is gone: every offset of it is a hole
        self.dense = clean_to is None  # offsets follow on batch to batch (not once the log cleaner removed some)
        # log compaction: the rewrite count, the offset up to which its keys were
        # deduplicated, when it was first cleaned (tombstones' delete horizon
        # counts from there) and how many tombstones it still holds
        self.generation = generation
        self.clean_to = clean_to
        self.cleaned_ms = cleaned_ms
        self.tombstones = tombstones
        self._off: array | None = None  # index not loaded yet
        self._pos = array("q")
        self._tval = array("q")
        self._tpos = array("q")
        self._since_index = 0

    # files -------------------------------------------------------------------

    def paths(self) -> list[str]:
        return [self.stem + suffix for suffix in layout.PARTITIONLET_SUFFIXES]

    def start_empty(self) -> None:
        """A new, empty log file exists: index it from scratch."""
        self._reset_index()

    def fd(self) -> int:
        return self.handles.get(self.log_path)

    def close_file(self) -> None:
        self.handles.forget(self.log_path)

    def info(self) -> dict:
        """The manifest's record of this partitionlet."""
        out = {
            "base": self.base, "volume": self.volume.id, "sealed": self.sealed, "next": self.next_offset,
            "size": self.size, "max_ts": self.max_ts, "max_ts_offset": self.max_ts_offset,
            "created_ms": self.created_ms,
        }
        if self.holes:
            out["holes"] = [list(h) for h in self.holes]
        if self.clean_to is not None:
            out.update(generation=self.generation, clean_to=self.clean_to, cleaned_ms=self.cleaned_ms,
                       tombstones=self.tombstones)
        return out

    # holes -------------------------------------------------------------------

    def add_hole(self, first: int, resume: int, pos: int, end: int) -> None:
        """Quarantine offsets [first, resume) held by bytes [pos, end)."""
        if resume <= first:
            return
        hole = (first, resume, pos, end)
        if hole not in self.holes:
            bisect.insort(self.holes, hole)

    def hole_at(self, offset: int) -> tuple[int, int, int, int] | None:
        """The hole holding `offset`, if any."""
        if self.missing:
            return (self.base, self.next_offset, 0, 0)
        for hole in self.holes:
            if hole[0] <= offset < hole[1]:
                return hole
        return None

    def _skip(self, pos: int) -> int:
        """Step over the damaged bytes of a hole starting at pos."""
        for _first, _resume, start, end in self.holes:
            if start == pos and end > pos:
                return end
        return pos

    # indexes -----------------------------------------------------------------

    def _reset_index(self) -> None:
        self._off, self._pos = array("q"), array("q")
        self._tval, self._tpos = array("q"), array("q")
        self._since_index = 0

    def _add_entry(self, base: int, pos: int) -> None:
        self._off.append(base)
        self._pos.append(pos)
        self._tval.append(self.max_ts)
        self._tpos.append(pos)
        self._since_index = 0

    def index_bytes(self) -> tuple[bytes, bytes]:
        self.ensure_index()
        return _pairs_to_bytes(self._off, self._pos), _pairs_to_bytes(self._tval, self._tpos)

    def write_index_files(self, index: bytes, timeindex: bytes) -> None:
        """Blocking: write and fsync both index files.

        On a full disk they are left out: the next load rebuilds them from the log.
        """
        written = []
        try:
            for suffix, data in ((layout.INDEX_SUFFIX, index), (layout.TIMEINDEX_SUFFIX, timeindex)):
                path = self.stem + suffix
                written.append(path)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            if exc.errno not in FULL_ERRNOS:
                raise
            log.warning("%s: no room for its index files; they will be rebuilt from the log", self.log_path)
            unlink_files(written)

    def ensure_index(self) -> None:
        """Load the index files, or rebuild them from the log if they do not fit it."""
        if self._off is not None:
            return
        try:
            with open(self.stem + layout.INDEX_SUFFIX, "rb") as f:
                off, pos = _bytes_to_pairs(f.read())
            with open(self.stem + layout.TIMEINDEX_SUFFIX, "rb") as f:
                tval, tpos = _bytes_to_pairs(f.read())
        except FileNotFoundError:
            off = None
        if off is not None and self._index_fits(off, pos, tval, tpos):
            self._off, self._pos, self._tval, self._tpos = off, pos, tval, tpos
            self._since_index = self.size - pos[-1] if len(pos) else self.size
            return
        log.warning("%s%s and %s%s do not match %s; rebuilt from the log", self.stem, layout.INDEX_SUFFIX,
                    os.path.basename(self.stem), layout.TIMEINDEX_SUFFIX, os.path.basename(self.log_path))
        self._rebuild_index()

    def _rebuild_index(self) -> None:
        self._reset_index()
        known_next, known_size = self.next_offset, self.size
        self.max_ts = -1
        self.recover(0, self.base, truncate=False, known_next=known_next, offset_limit=known_next)
        self.size = max(self.size, known_size) if self.sealed else self.size

    def _index_fits(self, off: array, pos: array, tval: array, tpos: array) -> bool:
        if len(off) != len(tval) or (self.size and not len(off)):
            return False
        if len(off) and (off[0] != self.base or pos[0] != 0 or pos[-1] >= self.size or off[-1] >= self.next_offset):
            return False
        # ascending and distinct positions and offsets, timestamps never going down (C-speed checks: an
        # index of a 1 GiB partitionlet has 256k entries)
        positions, offsets, times = pos.tolist(), off.tolist(), tval.tolist()
        return (positions == sorted(positions) and len(set(positions)) == len(positions)
                and offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
                and times == sorted(times) and tpos.tolist() == positions)

    # writing -----------------------------------------------------------------

    def append(self, prefix: bytes, body: memoryview, base: int, next_offset: int, max_ts: int) -> None:
        """Write one batch at the end; on OSError nothing of it is kept."""
        self.ensure_index()  # after a restart the index is loaded lazily
        fd = self.fd()
        pos = self.size
        total = len(prefix) + len(body)
        try:
            written = os.pwritev(fd, [prefix, body], pos)
            while written < total:  # a short write: finish it or fail with the error
                rest = (prefix + bytes(body))[written:]
                written += os.pwrite(fd, rest, pos + written)
        except OSError:
            os.ftruncate(fd, pos)
            raise
        self.note_written(base, pos, total, next_offset, max_ts)
        if self.verified == pos:  # appended batches had their CRC checked on the way in
            self.verified = self.size

    def recover(self, start: int, expected_next: int, *, truncate: bool, known_next: int | None = None,
                offset_limit: int | None = None) -> Recovered:
        """Validate the log from `start`, index what is valid, quarantine damaged stretches.

        A torn or damaged tail is cut off when `truncate` (the active
        partitionlet: appends go on after the last valid batch) and kept as
        a hole up to `known_next` otherwise (a sealed one: its offsets are
        known and must not be handed out again).
        """
        fd = self.fd()
        file_size = os.fstat(fd).st_size
        self.ensure_index_for_recovery(start)
        known = [(h[0], h[1]) for h in self.holes]  # quarantined before: batches after them are no jump
        self.holes = [h for h in self.holes if h[2] < start]  # what lies past start is found again
        result = Recovered([], [])
        pos = start
        for item in scan(fd, start, file_size, expected_next, offset_limit, self.dense, known):
            if isinstance(item, Hole):
                if item.end == -1:
                    result.cut = item
                    break
                self.add_hole(item.first, item.resume, item.pos, item.end)
                if (item.first, item.resume) not in known:  # found again: not new damage
                    result.holes.append(item)
                continue
            span = item
            if span.max_ts > self.max_ts:
                self.max_ts, self.max_ts_offset = span.max_ts, span.base
            if span.pos == 0 or self._since_index >= INDEX_INTERVAL or span.pos != pos:
                self._add_entry(span.base, span.pos)
            self._since_index += span.size
            if not result.epochs or result.epochs[-1][0] != span.epoch:
                result.epochs.append((span.epoch, span.base))
            pos = span.pos + span.size
            expected_next = span.last + 1
        self.size, self.next_offset = pos, expected_next
        if result.cut is not None:
            result.cut_bytes = file_size - pos
            if truncate:
                os.ftruncate(fd, pos)
                os.fsync(fd)
            else:
                self.size = file_size
                self.next_offset = max(expected_next, known_next if known_next is not None else expected_next)
                self.add_hole(expected_next, self.next_offset, pos, file_size)
        self.verified = self.size if start == 0 else self.verified
        return result

    def verify(self, stop: int, stop_offset: int) -> list[Hole]:
        """Blocking: check every batch of bytes [0, stop) (offsets below stop_offset); return new damage.

        Runs in a worker thread: bytes below `stop` never change once
        written. The caller records the holes on the event loop.
        """
        fd = os.open(self.log_path, os.O_RDONLY)  # its own descriptor: the LRU may close shared ones
        known = list(self.holes)
        try:
            file_size = os.fstat(fd).st_size
            start, expected = 0, self.base
            found = []
            end = min(stop, file_size)
            for item in scan(fd, start, end, expected, stop_offset, self.dense, [(h[0], h[1]) for h in known]):
                if isinstance(item, Hole):
                    if item.end == -1:
                        found.append(Hole(item.pos, end, item.first, stop_offset, item.reason))
                        expected = stop_offset
                        break
                    found.append(item)
                else:
                    expected = item.last + 1
            if expected < stop_offset and self.dense:  # (a cleaned partitionlet may end early)
                found.append(Hole(end, end, expected, stop_offset,
                                  f"ends at offset {expected} (byte {end}), before offset {stop_offset}"))
            return [h for h in found if h.resume > h.first and not any(x[0] <= h.first < x[1] for x in known)]
        finally:
            os.close(fd)

    def first_epoch(self) -> int | None:
        """The leader epoch in the first batch's header (None if it is unreadable)."""
        head = os.pread(self.fd(), bf.HEADER_SIZE, 0)
        if len(head) < bf.HEADER_SIZE or head[16] != bf.MAGIC:
            return None
        return bf.HEADER.unpack_from(head)[2]

    def learn_max_timestamp(self) -> None:
        """Set max_ts from the time index and the batches after its last entry (no CRC checks)."""
        try:
            self.ensure_index()
            start = 0
            if len(self._tval):
                best = max(range(len(self._tval)), key=self._tval.__getitem__)
                self.max_ts, self.max_ts_offset = self._tval[best], self._off[best]
                start = self._pos[-1]
            for _pos, base, _size, _last, max_ts, _attrs in self.walk(start):
                if max_ts > self.max_ts:
                    self.max_ts, self.max_ts_offset = max_ts, base
        except CorruptBatchError:
            pass  # damage: the background check quarantines it

    def position_before(self, pos: int) -> tuple[int, int]:
        """(byte position, base offset) of the last indexed batch at or before pos."""
        self.ensure_index()
        i = bisect.bisect_right(self._pos, pos) - 1
        return (self._pos[i], self._off[i]) if i >= 0 else (0, self.base)

    def ensure_index_for_recovery(self, start: int) -> None:
        """Keep index entries below `start` (trusted), or start a fresh index at 0."""
        if start == 0:
            self._reset_index()
            return
        self.size = start
        self.ensure_index()
        keep = bisect.bisect_left(self._pos, start)
        for arr in (self._off, self._pos, self._tval, self._tpos):
            del arr[keep:]
        self._since_index = start - self._pos[-1] if len(self._pos) else start

    # reading -----------------------------------------------------------------

    def walk(self, pos: int, stop: int | None = None) -> Iterator[tuple[int, int, int, int, int, int]]:
        """(pos, base, size, last offset, max timestamp, attributes) of batches from pos."""
        stop = self.size if stop is None else stop
        fd = self.fd()
        buf = b""
        buf_start = pos
        while pos < stop:
            if self.holes:
                pos = self._skip(pos)
                if pos >= stop:
                    return
            rel = pos - buf_start
            if rel + _WALK.size > len(buf):
                buf = os.pread(fd, _WALK_CHUNK, pos)
                buf_start, rel = pos, 0
                if len(buf) < _WALK.size:
                    return
            base, length, _epoch, magic, _crc, attrs, lod, _bts, max_ts = _WALK.unpack_from(buf, rel)
            size = length + bf.LOG_OVERHEAD
            if magic != bf.MAGIC or size < bf.HEADER_SIZE:  # damaged after it was checked
                raise CorruptBatchError(f"{self.log_path}: no valid batch header at byte {pos}")
            yield pos, base, size, base + lod, max_ts, attrs
            pos += size

    def locate(self, offset: int) -> tuple[int, int]:
        """(position, size) of the batch holding `offset` (which must be in range).

        Headers are checked for dense offsets on the way: the base offset
        lies outside the CRC, and a flipped one must not pass for the batch
        asked for (CorruptBatchError; the caller verifies the partitionlet).
        """
        hole = self.hole_at(offset) if self.holes or self.missing else None
        if hole is not None:
            raise DamagedRangeError(
                f"{self.log_path}: offsets {hole[0]}..{hole[1] - 1} are damaged and quarantined", hole[0], hole[1]
            )
        self.ensure_index()
        i = bisect.bisect_right(self._off, offset) - 1
        start, expected = (self._pos[i], self._off[i]) if i >= 0 else (0, self.base)
        for pos, base, size, last, _ts, _attrs in self.walk(start):
            if base != expected and not self._lost(expected, base):
                raise CorruptBatchError(f"{self.log_path}: the batch at byte {pos} says offset {base}, "
                                        f"expected {expected}")
            if last >= offset:
                return pos, size
            expected = last + 1
        raise LookupError(f"offset {offset} not found in {self.log_path}")

    def _lost(self, first: int, resume: int) -> bool:
        """Whether a jump from offset `first` to `resume` is expected: over a quarantined range, or cleaned away."""
        return first < resume and (not self.dense or any(h[0] <= first and resume <= h[1] for h in self.holes))

    def reindex(self) -> None:
        """The log is intact but its index does not lead to the batches: rebuild it from the log."""
        log.warning("%s%s does not match %s; rebuilt from the log", self.stem, layout.INDEX_SUFFIX,
                    os.path.basename(self.log_path))
        self._off = None
        self._rebuild_index()

    def note_written(self, base: int, pos: int, total: int, next_offset: int, max_ts: int) -> None:
        """Account and index a batch just written at `pos` (by append, or by the log cleaner
        writing a new partitionlet's file)."""
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.max_ts_offset = base
        if pos == 0 or self._since_index >= INDEX_INTERVAL:
            self._add_entry(base, pos)
        self._since_index += total
        self.size = pos + total
        self.next_offset = next_offset

    def read(self, offset: int, max_bytes: int, verify: bool = True) -> bytes:
        """Whole batches from the one holding `offset`, at least one, up to max_bytes.

        A read ends before the next hole. With `verify`, bytes past those
        already checked have their CRCs checked now: a damaged batch is
        quarantined and the read ends before it (DamagedRangeError if it is
        the first). b"" when the log cleaner left no batch at or after `offset`.
        """
        if not self.dense and not self._batch_from(offset):
            return b""
        start, first = self.locate(offset)
        limit = start + max(max_bytes, first)
        for _f, _r, hole_pos, _e in self.holes:
            if hole_pos > start:
                limit = min(limit, hole_pos)
                break
        if limit >= self.size:
            end = self.size
        else:
            j = bisect.bisect_right(self._pos, limit) - 1
            end = max(self._pos[j], start + first)  # every batch before an indexed position fits
            for pos, _base, size, _last, _ts, _attrs in self.walk(end):
                if pos + size > limit:
                    break
                end = pos + size
        data = os.pread(self.fd(), end - start, start)
        if verify and end > self.verified:
            data = self._checked(data, start, offset)
        elif verify and not self._framed(data):
            raise CorruptBatchError(f"{self.log_path}: bytes {start}..{end} no longer split into the batches "
                                    "checked there before")
        return data

    def _framed(self, data: bytes) -> bool:
        """Whether bytes checked before still split into whole batches whose offsets follow on (over a
        quarantined range, or a cleaned one, they may jump). A batch's length and base offset lie outside
        its CRC: a bit flipped there after the check (bit rot under a running broker) had the batch and
        every one after it in the read handed out cut at the wrong places, and librdkafka took record bytes
        for an offset and skipped the rest of the partition (the workers campaign, seed 5501)."""
        pos, expected = 0, -1
        while True:
            pos, expected, base = _frame_walk(data, pos, expected)
            if pos >= len(data):
                return True
            if base < 0 or not self._lost(expected, base):
                return False
            expected = -1  # over the jump: the batch there starts the walk again

    def _checked(self, data: bytes, start: int, offset: int) -> bytes:
        """The whole batches of `data` (read at `start`) up to the first that fails its CRC."""
        view = memoryview(data)
        pos = 0
        head_base = bf.HEADER.unpack_from(view, 0)[0] if len(view) >= bf.HEADER_SIZE else offset
        first = head_base if self.base <= head_base <= offset else offset  # locate checked the first header
        while pos + bf.HEADER_SIZE <= len(view):
            base, length, _epoch, magic, crc, _attrs, lod, *_rest = bf.HEADER.unpack_from(view, pos)
            size = length + bf.LOG_OVERHEAD
            if (magic != bf.MAGIC or pos + size > len(view) or (base != first and not self._lost(first, base))
                    or crc32c.crc32c(view[pos + bf.CRC_START : pos + size]) != crc):
                break
            pos += size
            first = base + lod + 1
        if pos == len(view):
            if start <= self.verified:
                self.verified = max(self.verified, start + pos)
            return data
        bad = start + pos
        span = resync(self.fd(), bad + 1, self.size, first, self.next_offset)
        resume_pos, resume = (span.pos, span.base) if span is not None else (self.size, self.next_offset)
        self.add_hole(first, resume, bad, resume_pos)
        log.error("%s: batch at byte %d fails its CRC-32C; offsets %d..%d quarantined", self.log_path, bad, first,
                  resume - 1)
        if pos == 0:
            raise DamagedRangeError(f"{self.log_path}: offsets {first}..{resume - 1} are damaged", first, resume)
        return data[:pos]

    def batch(self, pos: int, size: int) -> bytes:
        return os.pread(self.fd(), size, pos)

    def _batch_from(self, offset: int) -> bool:
        """Whether a batch holding `offset` or a later one is left (cleaned partitionlets end in gaps)."""
        try:
            self.locate(offset)
        except LookupError:
            return False
        return True

    def candidates(self, timestamp: int, min_offset: int) -> Iterator[tuple[int, int, int, int, int, int]]:
        """Batches in offset order whose max timestamp is >= timestamp, from min_offset on."""
        self.ensure_index()
        k = bisect.bisect_left(self._tval, timestamp) - 1
        start = self._tpos[k] if k >= 0 else 0
        if min_offset > self.base:
            start = max(start, self._position_from(min_offset))
        for span in self.walk(start):
            if span[4] >= timestamp and span[3] >= min_offset:
                yield span

    def _position_from(self, offset: int) -> int:
        """Where the batch holding `offset` starts, or the first batch after it if that is quarantined."""
        try:
            return self.locate(offset)[0]
        except DamagedRangeError as exc:
            return self.size if exc.resume_at >= self.next_offset else self.locate(exc.resume_at)[0]
        except LookupError:  # the log cleaner left nothing from there on
            return self.size

