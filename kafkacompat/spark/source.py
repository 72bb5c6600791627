"""`format("kafkacompat")`: Spark reads a stream's partitionlets where they lie.

A Python data source (Spark 4's `pyspark.sql.datasource`): the driver
plans offset ranges from the chain manifests and indexes (plan.py); each
task opens its partitionlet files read-only, checks every batch's CRC,
decodes records (every codec) straight into Arrow column buffers (C, see
protocol/record_columns.py) and hands Spark Arrow batches. No broker is
in the data path and no JVM connector jar is needed. The schema and
column types are those of Spark's Kafka source.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..broker.topic_names import split_name
from ..protocol.record_columns import Records, record_columns
from ..protocol.records import InvalidBatchError, read_header
from ..storage.disk.reader import PartitionSnapshot, StoreReader, read_batches
from .arrow import record_batch
from .options import Options, TopicRef, parse_options
from .plan import DataLossError, Range, Stability, batch_plan, cut, partitions_of, stability, starting_offset

BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
HEADERS_FIELD = StructField(
    "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])))
ROWS_PER_ARROW_BATCH = 8192
BYTES_PER_ARROW_BATCH = 16 << 20  # decompressed records: Arrow's int32 offsets hold 2 GiB per batch


class KafkacompatDataSource(DataSource):
    """Registered as `kafkacompat` by `kafkacompat.spark.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        return "kafkacompat"

    def schema(self) -> StructType:
        opts = parse_options(self.options)
        return StructType(BASE_FIELDS + ([HEADERS_FIELD] if opts.include_headers else []))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_options(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_options(self.options), schema)


class RangePartition(InputPartition):
    def __init__(self, value: Range) -> None:
        super().__init__(value)


class BatchReader(DataSourceReader):
    def __init__(self, opts: Options, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in batch_plan(self.opts)]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        return read_range(partition, self.opts, self.schema)


class StreamReader(DataSourceStreamReader):
    """Spark offsets are {topic: {partition: next offset}}, as Spark's Kafka source writes them."""

    def __init__(self, opts: Options, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
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
        return read_range(partition, self.opts, self.schema)

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


def read_range(partition: InputPartition | None, opts: Options, schema: StructType) -> Iterator[pa.RecordBatch]:
    """Spark asks for one partition, None, when a plan has no ranges: nothing to read then."""
    return iter(()) if partition is None else arrow_batches(partition.value, opts, schema)


def arrow_batches(rng: Range, opts: Options, schema: StructType) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches in the source's schema.

    Batches are decoded together, a few MiB at a time, straight into
    column buffers (protocol.record_columns), never a Python object per record.
    """
    arrow_schema = to_arrow_schema(schema)
    snap = StoreReader(rng.volumes).snapshot(rng.stream, rng.topic, rng.partition)
    if snap.log_start > rng.start and opts.fail_on_data_loss:
        raise DataLossError(f"{rng.label}/{rng.partition}: offsets {rng.start}..{snap.log_start - 1} are gone "
                            "(retention or deletion) since the query was planned")
    pending: list[Records] = []
    rows = size = 0
    for batch in read_batches(snap, rng.start, rng.end):
        header = read_header(batch)
        if header.is_control or header.base_offset in rng.aborted:
            continue
        records = Records.of(batch, header)
        pending.append(records)
        rows += header.record_count
        size += len(records.payload)
        if rows >= ROWS_PER_ARROW_BATCH or size >= BYTES_PER_ARROW_BATCH:
            yield _decoded(pending, rng, opts, arrow_schema)
            pending, rows, size = [], 0, 0
    if pending:
        yield _decoded(pending, rng, opts, arrow_schema)


def _decoded(pending: list[Records], rng: Range, opts: Options, schema: pa.Schema) -> pa.RecordBatch:
    try:
        columns = record_columns(pending, rng.start, rng.end, opts.include_headers)
    except InvalidBatchError as exc:  # stored with a good CRC, yet not records: damage, never rows
        raise InvalidBatchError(f"{rng.label}/{rng.partition}: {exc}") from None
    return record_batch(columns, rng.label, rng.partition, schema)
