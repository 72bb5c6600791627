"""A read-only view of an on-disk store, for readers outside the broker.

Analytics (the PySpark source in kafkacompat.spark) read partitionlets
where they lie, while a broker may be appending to them. So this view
never writes a byte, never takes the store's lock, and trusts nothing it
did not check: the chain manifest says which partitionlets a partition
has and where its log starts; the bytes of every batch handed out were
checked (whole, magic 2, offsets rising, CRC-32C). A torn batch at the end
of the active partitionlet is a write still in progress and ends the
snapshot there; a whole batch that fails its CRC is damage and raises.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from collections.abc import Callable, Iterator, Sequence

import crc32c

from .. import batch_format as bf
from ..errors import CorruptBatchError, StorageError, UnknownTopicError
from . import layout
from .format import check_format, replay_topics
from .metadata import find_streams

_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionletFile:
    path: str
    base: int
    sealed: bool
    size: int  # bytes the manifest vouches for; an active partitionlet may hold more
    next_offset: int  # one past the last offset in those bytes


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """What one partition held when looked at: read it with `read_batches`."""

    stream: str
    topic: str
    index: int
    log_start: int
    high_watermark: int
    files: tuple[PartitionletFile, ...]
    active_end: int  # bytes of the active partitionlet that hold whole, intact batches


class StoreReader:
    """Streams, topics and partitions of a store given its data dirs (volumes)."""

    def __init__(self, volumes: Sequence[str]) -> None:
        if not volumes:
            raise StorageError("a store reader needs at least one data directory")
        self.volumes = [os.path.abspath(v) for v in volumes]
        self._by_id: dict[str, str] = {}
        for volume in self.volumes:
            try:
                with open(os.path.join(volume, layout.VOLUME_ID_FILE)) as f:
                    self._by_id[f.read().strip()] = volume
            except FileNotFoundError:
                raise StorageError(f"{volume} is not a kafkacompat data directory (no {layout.VOLUME_ID_FILE})") from None
        check_format(os.path.join(self.volumes[0], layout.STORE_FILE))

    @property
    def root(self) -> str:
        return self.volumes[0]

    def streams(self) -> list[str]:
        """Stream paths, from the stream directories on the first volume."""
        return sorted(path for path, _ in find_streams(self.root))

    def topics(self, stream: str) -> dict[str, int]:
        """Topic name -> partition count, replayed from the stream's catalog."""
        path = os.path.join(layout.stream_dir(self.root, stream), layout.TOPICS_FILE)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        records = []
        for line in data[: data.rfind(b"\n") + 1].splitlines():  # a torn last line is a write in progress
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the broker reports a damaged line when it opens the catalog
            if isinstance(rec, dict):
                records.append(rec)
        live, _bad = replay_topics(records)  # the broker reports incomplete records too
        return {name: rec["p"] for name, rec in live.items()}

    def snapshot(self, stream: str, topic: str, index: int) -> PartitionSnapshot:
        """The partition as it is now: its chain, log start and high watermark."""
        if topic not in self.topics(stream):
            raise UnknownTopicError(f"{stream}:{topic} does not exist in {self.root}")
        manifest_path = os.path.join(layout.partition_dir(self.root, stream, topic, index), layout.MANIFEST_FILE)
        try:
            with open(manifest_path, "rb") as f:
                manifest = json.loads(f.read())
        except FileNotFoundError:  # nothing was ever appended
            return PartitionSnapshot(stream, topic, index, 0, 0, (), 0)
        except ValueError as exc:
            raise StorageError(f"chain manifest {manifest_path} is unreadable: {exc}") from None
        files = []
        for rec in manifest["partitionlets"]:
            volume = self._by_id.get(rec["volume"])
            if volume is None:
                raise StorageError(f"{stream}:{topic}/{index} has data on volume {rec['volume']}, not given")
            directory = layout.partition_dir(volume, stream, topic, index)
            stem = layout.partitionlet_stem(directory, rec["base"])
            files.append(PartitionletFile(stem + layout.LOG_SUFFIX, rec["base"], rec["sealed"], rec["size"], rec["next"]))
        hw, active_end = manifest["next"], 0
        if files and not files[-1].sealed:
            hw, active_end = _intact_end(files[-1])
        return PartitionSnapshot(stream, topic, index, manifest["log_start"], hw, tuple(files), active_end)


def _intact_end(active: PartitionletFile) -> tuple[int, int]:
    """(next offset, byte end) of the whole, intact batches of the active partitionlet.

    Only what was appended since the manifest's checkpoint is scanned here;
    readers check every batch they hand out anyway.
    """
    next_offset, end = active.next_offset, active.size
    for pos, batch in _scan(active, active.size, None):
        header = bf.HEADER.unpack_from(batch)
        next_offset, end = header[0] + header[6] + 1, pos + len(batch)
    return next_offset, end


def _scan(part: PartitionletFile, pos: int, end: int | None) -> Iterator[tuple[int, memoryview]]:
    """(position, bytes) of each checked batch from `pos`; end None = to the last whole batch."""
    try:
        fd = os.open(part.path, os.O_RDONLY)
    except FileNotFoundError:
        raise StorageError(f"{part.path} is gone (retention or deletion while reading)") from None
    try:
        limit = os.fstat(fd).st_size if end is None else end
        buf, buf_pos = b"", pos
        while pos < limit:
            rel = pos - buf_pos
            if rel + bf.LOG_OVERHEAD > len(buf):
                buf, buf_pos, rel = os.pread(fd, min(_CHUNK, limit - pos), pos), pos, 0
            if len(buf) - rel < bf.HEADER_SIZE:
                if end is None:
                    return  # a header still being written
                raise CorruptBatchError(f"{part.path}: batch header at byte {pos} is cut short")
            header = bf.HEADER.unpack_from(buf, rel)
            size = header[1] + bf.LOG_OVERHEAD
            if header[3] != bf.MAGIC or size < bf.HEADER_SIZE:
                raise CorruptBatchError(f"{part.path}: malformed batch header at byte {pos}")
            if pos + size > limit:
                if end is None:
                    return  # a batch still being written
                raise CorruptBatchError(f"{part.path}: batch at byte {pos} runs past the partitionlet's end")
            if rel + size > len(buf):
                buf, buf_pos, rel = os.pread(fd, max(size, min(_CHUNK, limit - pos)), pos), pos, 0
            batch = memoryview(buf)[rel : rel + size]
            if crc32c.crc32c(batch[bf.CRC_START:]) != header[4]:
                raise CorruptBatchError(f"{part.path}: batch at byte {pos} (offset {header[0]}) fails its CRC-32C")
            yield pos, batch
            pos += size
    finally:
        os.close(fd)


def read_batches(snap: PartitionSnapshot, start: int, end: int) -> Iterator[memoryview]:
    """Whole, checked batches holding offsets in [start, end), never past the snapshot."""
    end = min(end, snap.high_watermark)
    start = max(start, snap.log_start)
    for n, part in enumerate(snap.files):
        next_base = snap.files[n + 1].base if n + 1 < len(snap.files) else snap.high_watermark
        if next_base <= start or part.base >= end:
            continue
        byte_end = part.size if part.sealed else snap.active_end
        for _, batch in _scan(part, _seek(part, start), byte_end):
            header = bf.HEADER.unpack_from(batch)
            if header[0] >= end:
                return
            if header[0] + header[6] >= start:
                yield batch


def batch_headers(snap: PartitionSnapshot, start: int) -> Iterator[tuple[memoryview, tuple]]:
    """(bytes, unpacked header) of each batch from the one holding `start` to the snapshot's end.

    For planning, not for handing out data: only headers are read (a
    control batch whole, as it is small and its record says what it is),
    and a batch's CRC is checked by whoever later reads its records.
    """
    start = max(start, snap.log_start)
    for n, part in enumerate(snap.files):
        next_base = snap.files[n + 1].base if n + 1 < len(snap.files) else snap.high_watermark
        if next_base <= start:
            continue
        byte_end = part.size if part.sealed else snap.active_end
        try:
            f = open(part.path, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            raise StorageError(f"{part.path} is gone (retention or deletion while reading)") from None
        with f:
            pos = _seek(part, start)
            while pos + bf.HEADER_SIZE <= byte_end:
                head = os.pread(f.fileno(), bf.HEADER_SIZE, pos)
                header = bf.HEADER.unpack_from(head)
                size = header[1] + bf.LOG_OVERHEAD
                if header[3] != bf.MAGIC or size < bf.HEADER_SIZE or pos + size > byte_end:
                    raise CorruptBatchError(f"{part.path}: malformed batch header at byte {pos}")
                if header[0] + header[6] >= start:
                    data = os.pread(f.fileno(), size, pos) if header[5] & bf.ATTR_CONTROL else head
                    yield memoryview(data), header
                pos += size


def _seek(part: PartitionletFile, offset: int) -> int:
    """The byte position of a batch at or before `offset`, from the sparse offset index."""
    if offset <= part.base:
        return 0
    return _index_position(part, layout.INDEX_SUFFIX, lambda base: base <= offset)


def _index_position(part: PartitionletFile, suffix: str, before: Callable[[int], bool]) -> int:
    """Walk an index file's (value, position) pairs while `before(value)`; 0 if it is absent or unsound."""
    try:
        with open(part.path[: -len(layout.LOG_SUFFIX)] + suffix, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0
    best = 0
    for i in range(0, len(data) - len(data) % 16, 16):
        value, pos = struct.unpack_from("<qq", data, i)
        if not before(value) or pos >= part.size or pos < best:
            break
        best = pos
    return best

def offset_for_timestamp(
    snap: PartitionSnapshot, timestamp: int, record_timestamps: Callable[[memoryview], list[tuple[int, int]]]
) -> int | None:
    """The first offset whose record timestamp is >= timestamp, or None.

    Batch headers carry their largest timestamp, so only the batch where it
    is first reached is decoded (by the injected `record_timestamps`, since
    the store knows nothing of records). Partitionlets whose time index
    shows an earlier maximum are skipped from their last such entry on.
    """
    for n, part in enumerate(snap.files):
        byte_end = part.size if part.sealed else snap.active_end
        for _, batch in _scan(part, _seek_time(part, timestamp), byte_end):
            header = bf.HEADER.unpack_from(batch)
            if header[0] + header[6] < snap.log_start or header[8] < timestamp:
                continue
            if header[5] & bf.ATTR_LOG_APPEND_TIME:
                return max(header[0], snap.log_start)
            for delta, ts in record_timestamps(batch):
                if ts >= timestamp and header[0] + delta >= snap.log_start:
                    return header[0] + delta
    return None


def _seek_time(part: PartitionletFile, timestamp: int) -> int:
    """The position of the last time-index entry whose running maximum is below `timestamp`."""
    return _index_position(part, layout.TIMEINDEX_SUFFIX, lambda value: value < timestamp)
