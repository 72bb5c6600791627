"""Benchmark the cost of checking stored data: `python -m kafkacompat.storage.bench_check`.

Writes a store holding `--gib` GiB in partitionlets of `--partitionlet-gib`
GiB (1 MiB batches), then prints:
- the time to open it (what a broker start pays before serving: metadata
  files, chain manifests, the CRC check of the active partitionlet's tail),
- the same with the partition's chain manifest deleted (rebuilt from the
  partitionlet files),
- the time to check every batch's CRC (what `store check` and the broker's
  background pass pay),
- sequential read throughput with CRC checks on reads on versus off (side
  by side, same files, best of `--repeat`).
The data directory is deleted afterwards unless `--keep`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

from . import StreamPolicy
from .bench import make_batch
from .disk import layout
from .disk.store import DiskStore

BATCH = 1 << 20


async def _write(path: str, total: int, partitionlet: int) -> None:
    store = DiskStore([path], background_verify=False)
    await store.open()
    await store.create_stream("/bench", StreamPolicy(partitionlet_bytes=partitionlet, fsync="none"))
    await store.create_topic("/bench", "t", 1)
    part = store.partition("/bench", "t", 0)
    batch = make_batch(BATCH, 1_000)
    for _ in range(total // BATCH):
        await part.append(batch, 1)
    await store.close()


async def _open_and_first_read(path: str) -> float:
    start = time.perf_counter()
    store = DiskStore([path], background_verify=False)
    await store.open()
    part = store.partition("/bench", "t", 0)
    await part.read(part.high_watermark - 1, BATCH)
    elapsed = time.perf_counter() - start
    await store.close()
    return elapsed


async def _rebuild_on_open(path: str) -> float:
    """Open and first read with the partition's chain.json deleted (rebuilt from the files)."""
    directory = os.path.join(path, layout.STREAMS, "bench", "t", "0")
    os.unlink(os.path.join(directory, layout.MANIFEST_FILE))
    return await _open_and_first_read(path)


async def _check_all(path: str) -> float:
    start = time.perf_counter()
    store = DiskStore([path], background_verify=False)
    await store.open()
    damaged = await store.verify_all()
    elapsed = time.perf_counter() - start
    await store.close()
    assert damaged == 0
    return elapsed


async def _read_all(path: str, verify: bool) -> float:
    """Seconds to read the whole partition in 1 MiB fetches (fresh open: nothing verified yet)."""
    store = DiskStore([path], background_verify=False, verify_reads=verify)
    await store.open()
    part = store.partition("/bench", "t", 0)
    start = time.perf_counter()
    offset = part.log_start_offset
    while offset < part.high_watermark:
        data = await part.read(offset, BATCH)
        offset += max(len(data) // BATCH, 1)  # one record per 1 MiB batch
    elapsed = time.perf_counter() - start
    await store.close()
    return elapsed


async def run(args: argparse.Namespace) -> None:
    path = args.dir or tempfile.mkdtemp(prefix="kafkacompat-bench-check-")
    total = int(args.gib * (1 << 30))
    try:
        start = time.perf_counter()
        await _write(path, total, int(args.partitionlet_gib * (1 << 30)))
        print(f"wrote {total / (1 << 30):.1f} GiB in {args.partitionlet_gib:g} GiB partitionlets "
              f"in {time.perf_counter() - start:.1f} s", flush=True)
        opened = min([await _open_and_first_read(path) for _ in range(args.repeat)])
        print(f"open + first read (broker start; tail check of the active partitionlet): {opened * 1000:.0f} ms",
              flush=True)
        rebuilt = min([await _rebuild_on_open(path) for _ in range(args.repeat)])
        print(f"open + first read with chain.json deleted (rebuilt from the files): {rebuilt * 1000:.0f} ms",
              flush=True)
        checked = min([await _check_all(path) for _ in range(args.repeat)])
        print(f"check every CRC (store check / background pass): {checked:.1f} s, "
              f"{total / checked / (1 << 30):.2f} GiB/s", flush=True)
        for _ in range(args.repeat):
            on = await _read_all(path, True)
            off = await _read_all(path, False)
            print(f"sequential read, CRC checks on: {total / on / (1 << 30):.2f} GiB/s; "
                  f"off: {total / off / (1 << 30):.2f} GiB/s (on/off time ratio {on / off:.2f})", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="where to write the store (default: a temporary directory)")
    parser.add_argument("--gib", type=float, default=10.0, help="data to store, in GiB (default 10)")
    parser.add_argument("--partitionlet-gib", type=float, default=1.0, help="partitionlet size, GiB (default 1)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measurement (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
