"""Helpers for the storage tests: batches built the way producers build them."""

from __future__ import annotations

from kafkacompat.protocol.records import Record, build_batch


def batch(n: int = 1, *, ts: int = 1_000, step: int = 1, size: int = 10, compression: str = "none",
          timestamps: list[int] | None = None) -> bytes:
    """A batch of n records with values of `size` bytes and timestamps ts, ts+step, ..."""
    stamps = timestamps if timestamps is not None else [ts + i * step for i in range(n)]
    records = [Record(key=None, value=bytes([65 + i % 26]) * size, timestamp=t) for i, t in enumerate(stamps)]
    return build_batch(records, compression=compression)


def values(data: bytes | memoryview) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole batches read back."""
    from kafkacompat.protocol.records import iter_records

    return [(r.offset, r.value) for r in iter_records(data)]
