"""Which offsets of which partitions a query reads, decided on the driver.

A plan is a list of `Range`s: one per topic partition, cut further at
partitionlet boundaries so a large partition is read by several tasks.
Offsets are resolved against the partitionlet indexes (the sparse offset
index for a start offset, batch headers and, only for the batch that
straddles it, record timestamps for a start timestamp), never by reading
the whole log.

With kafka.isolation.level=read_committed the driver also walks the batch
headers from the start offset on, as a read_committed consumer's broker
would: a range ends at the last stable offset (the first offset of a
transaction still open) and carries the base offsets of the aborted
transactions' batches, which its task skips.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..storage.disk.reader import PartitionSnapshot, StoreReader, batch_headers, offset_for_timestamp
from .options import EARLIEST, LATEST, OptionError, Options, TopicRef


class DataLossError(RuntimeError):
    """Offsets a query was asked for are gone (retention, deletion): failOnDataLoss."""


@dataclasses.dataclass(frozen=True)
class Range:
    """Offsets [start, end) of one partition: a Spark input partition's payload."""

    volumes: tuple[str, ...]
    stream: str
    topic: str
    label: str
    partition: int
    start: int
    end: int
    aborted: frozenset[int] = frozenset()  # base offsets of aborted transactional batches (read_committed)


@dataclasses.dataclass(frozen=True)
class Stability:
    """What read_committed may see of a partition from some offset on."""

    last_stable: int  # the first offset of a transaction still open, or the high watermark
    aborted: frozenset[int]  # base offsets of batches whose transaction aborted


def stability(snap: PartitionSnapshot, start: int) -> Stability:
    # read_committed only: the broker's transaction codec is not imported for every plan
    from ..broker.cleaner_codec import CLEANER_CODEC
    from ..storage.compaction import scan_log

    scan = scan_log(batch_headers(snap, start), CLEANER_CODEC.is_abort_marker)
    last_stable = snap.high_watermark if scan.first_open is None else scan.first_open
    return Stability(last_stable, frozenset(scan.aborted))


def partitions_of(opts: Options, reader: StoreReader) -> list[tuple[TopicRef, int]]:
    """(topic, partition index) of everything the query reads now."""
    chosen = []
    for ref in opts.resolve(reader):
        count = reader.topics(ref.stream).get(ref.name)
        if count is None:
            raise OptionError(f"topic {ref.label!r} does not exist in {opts.volumes[0]}")
        wanted: Iterable[int] = opts.assign[ref.label] if opts.assign is not None else range(count)
        chosen.extend((ref, p) for p in wanted if p < count)
    return chosen


def starting_offset(opts: Options, ref: TopicRef, index: int, snap: PartitionSnapshot) -> int:
    if opts.starting_timestamp is not None:
        # only this plan decodes records: the protocol package and its codecs are imported here
        from ..protocol.records import record_timestamps

        hit = offset_for_timestamp(snap, opts.starting_timestamp, record_timestamps)
        if hit is None:
            raise OptionError(
                f"no record of {ref.label}/{index} has a timestamp at or after {opts.starting_timestamp}")
        return hit
    return _spec(opts.starting, ref, index, snap, EARLIEST)


def ending_offset(opts: Options, ref: TopicRef, index: int, snap: PartitionSnapshot) -> int:
    return _spec(opts.ending, ref, index, snap, LATEST)


def _spec(spec: object, ref: TopicRef, index: int, snap: PartitionSnapshot, default: int) -> int:
    if spec == "earliest":
        value = EARLIEST
    elif spec == "latest":
        value = LATEST
    else:
        value = spec.get(ref.label, {}).get(index, default)  # type: ignore[union-attr]
    if value == EARLIEST:
        return snap.log_start
    if value == LATEST:
        return snap.high_watermark
    return value


def cut(
    opts: Options, ref: TopicRef, index: int, start: int, end: int, snap: PartitionSnapshot,
    aborted: frozenset[int] = frozenset(),
) -> list[Range]:
    """[start, end) as ranges that each stay within one partitionlet."""
    if start < snap.log_start:
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{ref.label}/{index}: offsets from {start} were asked for but the log starts at "
                f"{snap.log_start} (set failOnDataLoss=false to skip what is gone)")
        start = snap.log_start
    bounds = [start, *(f.base for f in snap.files if start < f.base < end), end]
    return [Range(opts.volumes, ref.stream, ref.name, ref.label, index, a, b,
                  frozenset(o for o in aborted if a <= o < b))
            for a, b in zip(bounds, bounds[1:]) if a < b]


def batch_plan(opts: Options) -> list[Range]:
    """The ranges of a batch query: startingOffsets/Timestamp to endingOffsets."""
    reader = StoreReader(opts.volumes)
    ranges = []
    for ref, index in partitions_of(opts, reader):
        snap = reader.snapshot(ref.stream, ref.name, index)
        start = starting_offset(opts, ref, index, snap)
        end = min(ending_offset(opts, ref, index, snap), snap.high_watermark)
        aborted: frozenset[int] = frozenset()
        if opts.read_committed:
            stable = stability(snap, start)
            end, aborted = min(end, stable.last_stable), stable.aborted
        ranges.extend(cut(opts, ref, index, start, end, snap, aborted))
    return ranges
