"""One partitionlet: a log file of raw batches plus sparse offset and time indexes.

The indexes hold an entry every INDEX_INTERVAL bytes of log: the offset
index maps a batch's base offset to its byte position; the time index maps
the largest timestamp seen so far to the position of the batch where it was
reached. Both are kept in memory (a few bytes per 4 KiB of log) and written
to `.index` / `.timeindex` when the partitionlet is sealed or checkpointed;
a missing or inconsistent index file is rebuilt by scanning the log.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
from array import array
from collections.abc import Iterator

from .. import batch_format as bf
from ..errors import CorruptBatchError
from . import layout
from .files import FULL_ERRNOS, unlink_files
from .handles import FileHandles
from .recovery import valid_batches
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


class Partitionlet:
    __slots__ = (
        "directory", "volume", "base", "handles", "stem", "log_path", "sealed", "next_offset", "size", "max_ts", "max_ts_offset",
        "created_ms", "generation", "clean_to", "cleaned_ms", "tombstones", "_off", "_pos", "_tval", "_tpos",
        "_since_index",
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
        info = {
            "base": self.base, "volume": self.volume.id, "sealed": self.sealed, "next": self.next_offset,
            "size": self.size, "max_ts": self.max_ts, "max_ts_offset": self.max_ts_offset,
            "created_ms": self.created_ms,
        }
        if self.clean_to is not None:
            info.update(generation=self.generation, clean_to=self.clean_to, cleaned_ms=self.cleaned_ms,
                        tombstones=self.tombstones)
        return info

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
        log.info("%s: rebuilding its indexes from the log", self.log_path)
        self._reset_index()
        expected_size, next_offset = self.size, self.next_offset
        self.size, self.next_offset, self.max_ts = 0, self.base, -1
        self.recover(0, self.base, expected_size)
        if self.clean_to is not None:  # a cleaned log may end in a gap
            self.next_offset = max(self.next_offset, next_offset)

    def _index_fits(self, off: array, pos: array, tval: array, tpos: array) -> bool:
        if len(off) != len(tval) or (self.size and not len(off)):
            return False
        if len(off) and (off[0] != self.base or pos[0] != 0 or pos[-1] >= self.size or off[-1] >= self.next_offset):
            return False
        return all(pos[i] < pos[i + 1] for i in range(len(pos) - 1)) and list(tpos) == list(pos)

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

    def recover(self, start: int, expected_next: int, end: int | None = None) -> list[tuple[int, int]]:
        """Validate the log from `start`, index what is valid, cut off the rest.

        Returns (leader epoch, base offset) of each batch, for rebuilding the
        epoch history. The file is truncated after the last valid batch.
        """
        fd = self.fd()
        file_size = os.fstat(fd).st_size
        end = file_size if end is None else min(end, file_size)
        self.ensure_index_for_recovery(start)
        epochs: list[tuple[int, int]] = []
        pos = start
        for span in valid_batches(fd, start, end, expected_next, self.log_path, dense=self.clean_to is None):
            if span.max_ts > self.max_ts:
                self.max_ts, self.max_ts_offset = span.max_ts, span.base
            if span.pos == 0 or self._since_index >= INDEX_INTERVAL:
                self._add_entry(span.base, span.pos)
            self._since_index += span.size
            if not epochs or epochs[-1][0] != span.epoch:
                epochs.append((span.epoch, span.base))
            pos = span.pos + span.size
            expected_next = span.last + 1
        self.size, self.next_offset = pos, expected_next
        if pos < end:
            log.warning("%s: truncating %d bytes after the last valid batch", self.log_path, file_size - pos)
            os.ftruncate(fd, pos)
            os.fsync(fd)
        return epochs

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
        """(position, size) of the batch holding `offset`, or of the first after it
        (a cleaned partitionlet has gaps); LookupError if none is."""
        self.ensure_index()
        i = bisect.bisect_right(self._off, offset) - 1
        start = self._pos[i] if i >= 0 else 0
        for pos, _base, size, last, _ts, _attrs in self.walk(start):
            if last >= offset:
                return pos, size
        raise LookupError(f"offset {offset} not found in {self.log_path}")

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at least one, up to max_bytes.

        b"" when no batch at or after `offset` is left (cleaned away).
        """
        try:
            start, first = self.locate(offset)
        except LookupError:
            if self.clean_to is None:
                raise
            return b""
        limit = start + max(max_bytes, first)
        if limit >= self.size:
            end = self.size
        else:
            j = bisect.bisect_right(self._pos, limit) - 1
            end = max(self._pos[j], start + first)  # every batch before an indexed position fits
            for pos, _base, size, _last, _ts, _attrs in self.walk(end):
                if pos + size > limit:
                    break
                end = pos + size
        return os.pread(self.fd(), end - start, start)

    def batch(self, pos: int, size: int) -> bytes:
        return os.pread(self.fd(), size, pos)

    def candidates(self, timestamp: int, min_offset: int) -> Iterator[tuple[int, int, int, int, int, int]]:
        """Batches in offset order whose max timestamp is >= timestamp, from min_offset on."""
        self.ensure_index()
        k = bisect.bisect_left(self._tval, timestamp) - 1
        start = self._tpos[k] if k >= 0 else 0
        if min_offset > self.base:
            try:
                start = max(start, self.locate(min_offset)[0])
            except LookupError:  # cleaned away up to its end
                return
        for span in self.walk(start):
            if span[4] >= timestamp and span[3] >= min_offset:
                yield span

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, int, int, int, int]]:
        start = self.locate(offset)[0] if offset > self.base else 0
        return self.walk(start)

