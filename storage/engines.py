"""Choosing a storage engine by URL."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlparse

from .api import Store
from .disk.store import DiskStore
from .memory import MemoryStore
from .partition_base import RecordTimestamps


def open_store(
    url: str,
    *,
    volumes: Sequence[str] = (),
    default_stream: str = "/default",
    record_timestamps: RecordTimestamps | None = None,
    max_open_files: int = 1024,
    volume_limits: Mapping[str, int] | None = None,
    retention_check_ms: int = 60_000,
    skip_damaged: bool = False,
    verify_reads: bool = True,
) -> Store:
    """A store for `url`; the caller then awaits `store.open()`.

    `memory://` keeps everything in memory. `file:///abs/dir` or a plain
    path is the on-disk engine with that directory as its first volume and
    `volumes` as further data dirs. `record_timestamps(batch)` returns
    (offset delta, timestamp) per record, decoding compression; without it
    timestamp lookups answer at batch granularity.

    On-disk options: `max_open_files` bounds open log files (LRU);
    `volume_limits` caps the bytes of partitionlet data per volume path
    (StorageFullError beyond it); `retention_check_ms` is the period of the
    background retention pass; `skip_damaged` makes reads step over
    quarantined (damaged) ranges with a log line instead of failing them;
    `verify_reads` checks the CRC of stored bytes not yet verified since
    open before handing them out.
    """
    if url.startswith("memory:"):
        return MemoryStore(default_stream, record_timestamps)
    if url.startswith("file:"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"store url {url!r} names a remote host; use file:///absolute/path")
        path = unquote(parsed.path)
    elif "://" in url:
        raise ValueError(f"unsupported store url {url!r}: use memory://, file:///dir or a directory path")
    else:
        path = url
    return DiskStore(
        [os.path.abspath(path), *volumes], default_stream, record_timestamps, max_open_files=max_open_files,
        volume_limits=volume_limits, retention_check_ms=retention_check_ms, skip_damaged=skip_damaged,
        verify_reads=verify_reads,
    )
