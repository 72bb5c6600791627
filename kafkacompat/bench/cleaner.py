"""Benchmark the log cleaner: `python -m kafkacompat.bench.cleaner`.

Fills a compacted topic of the on-disk store (or, with `--engine cloud`, of
the PostgreSQL + S3 engine on a private PostgreSQL and moto's S3 server)
with batches of keyed records
(a key space smaller than the record count, so most records are
superseded), then times one cleaning and prints MB of log cleaned per
second. A second, identical log is cleaned under tracemalloc to report the
cleaner's peak Python heap, next to the dedupe buffer it was given: with a
buffer too small for the key space the map fills and only a prefix is
cleaned per pass, keeping memory bounded. Lives with the broker because the
cleaner needs the protocol's record codec, which the store never imports.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
import tracemalloc

from kafkacompat import storage
from kafkacompat.broker.cleaner_codec import CLEANER_CODEC
from kafkacompat.protocol.records import Record, build_batch, record_timestamps
from kafkacompat.storage import StreamPolicy
from kafkacompat.testing.services import cloud_store


async def _fill(part: storage.Partition, mb: int, keys: int, per_batch: int, value_bytes: int, codec: str) -> int:
    """Append about `mb` MiB of batches; returns the bytes appended."""
    rng = random.Random(7)
    padding = b"\0" * (value_bytes - value_bytes // 2)
    written = 0
    ts = 1_700_000_000_000
    pending = []
    while written < mb << 20:
        # each value half random, half zeros: codecs shrink it to about half, as with real payloads
        records = [Record(b"key-%08d" % rng.randrange(keys), rng.randbytes(value_bytes // 2) + padding,
                          timestamp=ts) for _ in range(per_batch)]
        batch = build_batch(records, compression=codec)
        if part.appends_in_call_order:  # the cloud engine: many appends in flight share one object
            pending.append(part.append(batch, per_batch))
            if len(pending) >= 256:
                await asyncio.gather(*pending)
                pending = []
        else:
            await part.append(batch, per_batch)
        written += len(batch)
    await asyncio.gather(*pending)
    return written


async def _one(args: argparse.Namespace, codec: str, traced: bool) -> dict:
    root = tempfile.mkdtemp(prefix="kafkacompat-cleaner-bench-")
    try:
        where: dict = {}
        if args.engine == "cloud":
            root_url, where["object_store"] = cloud_store()
        else:
            root_url = root
        st = storage.open_store(root_url, record_timestamps=record_timestamps, record_codec=CLEANER_CODEC,
                                cleaner_dedupe_buffer_bytes=args.buffer, cleaner_backoff_ms=3_600_000, **where)
        await st.open()
        await st.create_stream("/bench", StreamPolicy(partitionlet_bytes=args.partitionlet_mb << 20,
                                                      fsync=storage.FsyncPolicy.NONE))
        await st.create_topic("/bench", "t", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        part = st.partition("/bench", "t", 0)
        await _fill(part, args.mb, args.keys, args.per_batch, args.value_bytes, codec)
        await part.append(build_batch([Record(b"last", b"x")]), 1)  # rolls nothing; the active one stays
        if traced:
            tracemalloc.start()
        started = time.perf_counter()
        results = await st.clean_logs()
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
        if traced:
            tracemalloc.stop()
        await st.close()
        return {
            "codec": codec, "seconds": seconds, "peak": peak,
            "read": sum(r.bytes_read for r in results), "written": sum(r.bytes_written for r in results),
            "records": sum(r.records_read for r in results), "kept": sum(r.records_kept for r in results),
            "mapped": max((r.keys_mapped for r in results), default=0),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _main(args: argparse.Namespace) -> None:
    print(f"{args.engine} engine, log {args.mb} MiB per codec, {args.per_batch} records of {args.value_bytes} B "
          f"per batch, {args.keys} keys, partitionlets of {args.partitionlet_mb} MiB, dedupe buffer {args.buffer >> 20} MiB")
    header = ("codec", "MB cleaned", "s", "MB/s", "records", "kept", "keys mapped", "peak heap MB")
    print("  ".join(f"{h:>12}" for h in header))
    for codec in args.codecs.split(","):
        timed = await _one(args, codec, traced=False)
        traced = await _one(args, codec, traced=True)
        mb = timed["read"] / 1e6
        row = (codec, f"{mb:.1f}", f"{timed['seconds']:.2f}", f"{mb / timed['seconds']:.1f}", timed["records"],
               timed["kept"], timed["mapped"], f"{traced['peak'] / 1e6:.1f}")
        print("  ".join(f"{str(v):>12}" for v in row), flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m kafkacompat.bench.cleaner", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    p.add_argument("--mb", type=int, default=32, help="MiB of log to clean per codec (default 32)")
    p.add_argument("--keys", type=int, default=20_000, help="distinct keys (default 20000)")
    p.add_argument("--per-batch", type=int, default=50, help="records per batch (default 50)")
    p.add_argument("--value-bytes", type=int, default=200, help="bytes per record value (default 200)")
    p.add_argument("--partitionlet-mb", type=int, default=4, help="partitionlet size in MiB (default 4)")
    p.add_argument("--buffer", type=int, default=128 << 20,
                   help="dedupe buffer bytes, as log.cleaner.dedupe.buffer.size (default 128 MiB)")
    p.add_argument("--codecs", default="none,lz4,zstd", help="comma-separated codecs (default none,lz4,zstd)")
    p.add_argument("--engine", choices=("disk", "cloud"), default="disk",
                   help="disk (default), or cloud: PostgreSQL + S3, started on loopback for the run")
    asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    main()
