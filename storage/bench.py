"""Benchmark the on-disk store: `python -m kafkacompat.storage.bench`.

Prints append and read throughput for 1 KiB, 16 KiB and 1 MiB batches
under fsync none and interval (best of `--repeat` runs: on a VM, the first
touch of fresh page-cache memory is slow and noisy), and the time to open
a store holding 100,000 topics. Batches are built here (the store must not import the
protocol package): one record each, uncompressed, with a valid CRC-32C.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import struct
import tempfile
import time

import crc32c

from . import StreamPolicy, open_store
from . import batch_format as bf


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def make_batch(total_size: int, timestamp: int) -> bytes:
    """A one-record v2 batch of about `total_size` bytes."""
    value_len = max(total_size - bf.HEADER_SIZE - 16, 1)
    body = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(value_len) + bytes(value_len) + _varint(0)
    record = _varint(len(body)) + body
    out = bytearray(bf.HEADER_SIZE)
    bf.HEADER.pack_into(out, 0, 0, bf.HEADER_SIZE - bf.LOG_OVERHEAD + len(record), -1, bf.MAGIC, 0, 0, 0,
                        timestamp, timestamp, -1, -1, -1, 1)
    out += record
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[bf.CRC_START:]))
    return bytes(out)


async def bench_throughput(directory: str, batch_size: int, fsync: str, total_bytes: int) -> tuple[float, float]:
    """(append MB/s, read MB/s) for one partition."""
    store = open_store(directory)
    await store.open()
    stream = f"/bench_{fsync}_{batch_size}"
    await store.create_stream(stream, StreamPolicy(fsync=fsync))
    await store.create_topic(stream, "t", 1)
    part = store.partition(stream, "t", 0)
    batch = make_batch(batch_size, int(time.time() * 1000))
    count = max(total_bytes // len(batch), 1)
    t0 = time.perf_counter()
    for _ in range(count):
        await part.append(batch, 1)
    append_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    offset, read_bytes = 0, 0
    while offset < part.high_watermark:
        data = await part.read(offset, max(1 << 20, len(batch)))
        read_bytes += len(data)
        offset += len(data) // len(batch)
    read_s = time.perf_counter() - t0
    assert read_bytes == count * len(batch)
    await store.close()
    mb = count * len(batch) / 1e6
    return mb / append_s, mb / read_s


async def bench_open(directory: str, topics: int) -> tuple[float, float]:
    """(seconds to create, seconds to open) a store with `topics` single-partition topics."""
    store = open_store(directory)
    await store.open()
    t0 = time.perf_counter()
    for start in range(0, topics, 10_000):
        await asyncio.gather(*(store.create_topic("/default", f"topic-{i}", 1)
                               for i in range(start, min(start + 10_000, topics))))
    create_s = time.perf_counter() - t0
    await store.close()
    t0 = time.perf_counter()
    store = open_store(directory)
    await store.open()
    open_s = time.perf_counter() - t0
    assert len(store.list_topics("/default")) == topics
    await store.close()
    return create_s, open_s


async def main(args: argparse.Namespace) -> None:
    root = tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir)
    try:
        print(f"{'batch':>8} {'fsync':>9} {'append MB/s':>12} {'read MB/s':>10}")
        for size, label in ((1024, "1 KiB"), (16 * 1024, "16 KiB"), (1 << 20, "1 MiB")):
            for fsync in ("none", "interval"):
                best_append = best_read = 0.0
                for _ in range(args.repeat):
                    append, read = await bench_throughput(f"{root}/tp", size, fsync, args.mb << 20)
                    best_append, best_read = max(best_append, append), max(best_read, read)
                    shutil.rmtree(f"{root}/tp")
                print(f"{label:>8} {fsync:>9} {best_append:>12.0f} {best_read:>10.0f}", flush=True)
        create_s, open_s = await bench_open(f"{root}/topics", args.topics)
        print(f"{args.topics} topics: created in {create_s:.2f} s, store opened in {open_s:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="MiB appended per run (default 1024)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per case; the best is printed (default 2)")
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where to put the benchmark's data (default: a temp dir)")
    asyncio.run(main(parser.parse_args()))
