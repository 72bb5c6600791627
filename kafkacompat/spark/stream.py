"""`spark.readStream.format("kafkacompat")`: Spark offsets over partitionlets."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from ..storage.disk.reader import PartitionSnapshot, StoreReader
from ..topic_names import split_name
from .options import Options, TopicRef
from .plan import Stability, cut, partitions_of, stability, starting_offset
from .scan import RangePartition, read_range
from .typed import ColumnSchema


class StreamReader(DataSourceStreamReader):
    """Spark offsets are {topic: {partition: next offset}}, as Spark's Kafka source writes them."""

    def __init__(self, opts: Options, schema: StructType, typed: list[ColumnSchema] | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.typed = typed or []
        # The end of the last batch planned or committed: where maxOffsetsPerTrigger counts from.
        # Spark plans the last batch of its offset log again on restart, which sets it.
        self._position: dict[str, dict[str, int]] | None = None
        # read_committed: (topic label, partition) -> (start offset, what latestOffset's header walk found),
        # so planning the same batch does not walk the headers again. Batches below the LSO it found
        # belong to transactions already ended then, so their outcomes cannot have changed since.
        self._walked: dict[tuple[str, str], tuple[int, Stability]] = {}

    def initialOffset(self) -> dict:
        reader = StoreReader(self.opts.volumes)
        out: dict[str, dict[str, int]] = {}
        for ref, index in partitions_of(self.opts, reader):
            snap = reader.snapshot(ref.stream, ref.name, index)
            out.setdefault(ref.label, {})[str(index)] = starting_offset(self.opts, ref, index, snap)
        return out

    def latestOffset(self) -> dict:
        reader = StoreReader(self.opts.volumes)
        start = self._position if self._position is not None else self.initialOffset()
        latest: dict[str, dict[str, int]] = {}
        for ref, index in partitions_of(self.opts, reader):
            snap = reader.snapshot(ref.stream, ref.name, index)
            end = snap.high_watermark
            if self.opts.read_committed:  # as a read_committed consumer: no further than the LSO
                begin = start.get(ref.label, {}).get(str(index), snap.log_start)
                walked = stability(snap, begin)
                self._walked[ref.label, str(index)] = (begin, walked)
                end = walked.last_stable
            latest.setdefault(ref.label, {})[str(index)] = end
        limit = self.opts.max_offsets_per_trigger
        return latest if limit is None else rate_limit(start, latest, limit)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._position = end
        reader = StoreReader(self.opts.volumes)
        ranges = []
        for label, ends in end.items():
            stream, name = split_name(label, self.opts.default_stream)
            ref = TopicRef(stream, name, label)
            for index_text, stop in ends.items():
                index = int(index_text)
                snap = reader.snapshot(stream, name, index)
                begin = start.get(label, {}).get(index_text, snap.log_start)  # a new partition: from its start
                aborted = self._aborted(snap, label, index_text, begin) if self.opts.read_committed else frozenset()
                ranges.extend(cut(self.opts, ref, index, begin, stop, snap, aborted))
        return [RangePartition(r) for r in ranges]

    def _aborted(self, snap: PartitionSnapshot, label: str, index_text: str, begin: int) -> frozenset[int]:
        """The aborted batches from `begin` on: latestOffset's walk when it started there, else a new one."""
        cached = self._walked.get((label, index_text))
        if cached is not None and cached[0] == begin:
            return cached[1].aborted
        return stability(snap, begin).aborted

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        return read_range(partition, self.opts, self.schema, self.typed)

    def commit(self, end: dict) -> None:
        self._position = end


def rate_limit(start: dict, latest: dict, limit: int) -> dict:
    """Spread `limit` offsets over the partitions in proportion to how far each is behind.

    A partition `start` does not know yet is new and counts from offset 0.
    """
    begin = {(t, p): start.get(t, {}).get(p, 0) for t, ps in latest.items() for p in ps}
    behind = {(t, p): max(0, end - begin[t, p]) for t, ps in latest.items() for p, end in ps.items()}
    total = sum(behind.values())
    if total <= limit:
        return latest
    out = {t: dict(ps) for t, ps in latest.items()}
    shares = {tp: lag * limit // total for tp, lag in behind.items()}
    if not any(shares.values()):  # every share rounded down: the partition furthest behind takes it all
        shares[max(behind, key=behind.__getitem__)] = limit
    for (t, p), share in shares.items():
        out[t][p] = min(latest[t][p], begin[t, p] + share)
    return out
