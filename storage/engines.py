"""Choosing a storage engine by URL."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlparse

from .api import Store
from .compaction import DEFAULT_BACKOFF_MS, DEFAULT_DEDUPE_BUFFER_BYTES, RecordCodec
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
    record_codec: RecordCodec | None = None,
    cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
    cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
    object_store: str | None = None,
    flush_ms: int = 10,
    flush_bytes: int = 4 << 20,
    cache_bytes: int = 64 << 20,
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
    open before handing them out. `record_codec` (every engine) lets the log cleaner look
    inside batches: without it compacted topics keep every record; with it
    a pass every `cleaner_backoff_ms` cleans them with an offset map of at
    most `cleaner_dedupe_buffer_bytes` (Kafka's log.cleaner.* settings).

    `postgresql://USER@HOST:PORT/DB` is the cloud engine (storage/cloud):
    metadata in that database, data as objects under `object_store`
    (`s3://BUCKET/PREFIX`; endpoint and credentials from the AWS_*
    environment variables). Produced batches are buffered for `flush_ms` (or
    until `flush_bytes`) and written as one object; reads go through a cache
    of `cache_bytes`. Brokers sharing one such store see one namespace.
    """
    if url.startswith(("postgresql:", "postgres:")):
        if not object_store:
            raise ValueError("a postgresql:// store needs an object store for its data: --object-store s3://BUCKET/PREFIX")
        from .cloud.store import CloudStore  # asyncpg and aiobotocore load only for this engine

        return CloudStore(url, object_store, default_stream, record_timestamps, flush_ms=flush_ms,
                          flush_bytes=flush_bytes, cache_bytes=cache_bytes, retention_check_ms=retention_check_ms,
                          record_codec=record_codec, cleaner_dedupe_buffer_bytes=cleaner_dedupe_buffer_bytes,
                          cleaner_backoff_ms=cleaner_backoff_ms)
    if object_store:
        raise ValueError(f"--object-store is only for a postgresql:// store, not {url!r}")
    if url.startswith("memory:"):
        return MemoryStore(default_stream, record_timestamps, record_codec, cleaner_dedupe_buffer_bytes,
                           cleaner_backoff_ms)
    if url.startswith("file:"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"store url {url!r} names a remote host; use file:///absolute/path")
        path = unquote(parsed.path)
    elif "://" in url:
        raise ValueError(f"unsupported store url {url!r}: use memory://, file:///dir, a directory path "
                         "or postgresql://USER@HOST:PORT/DB")
    else:
        path = url
    return DiskStore(
        [os.path.abspath(path), *volumes], default_stream, record_timestamps, max_open_files=max_open_files,
        volume_limits=volume_limits, retention_check_ms=retention_check_ms, skip_damaged=skip_damaged,
        verify_reads=verify_reads, record_codec=record_codec,
        cleaner_dedupe_buffer_bytes=cleaner_dedupe_buffer_bytes, cleaner_backoff_ms=cleaner_backoff_ms,
    )
