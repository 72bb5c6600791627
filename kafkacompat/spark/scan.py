"""The read side of `format("kafkacompat")`: one Spark task's range as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ..protocol.record_columns import Records, record_columns
from ..protocol.records import InvalidBatchError, read_header
from ..storage.disk.reader import StoreReader, read_batches
from .arrow import record_batch
from .options import Options
from .plan import DataLossError, Range
from .typed import ColumnDecoder, ColumnSchema, decode_batch, raw_arrow_schema

ROWS_PER_ARROW_BATCH = 8192
BYTES_PER_ARROW_BATCH = 16 << 20  # decompressed records: Arrow's int32 offsets hold 2 GiB per batch


class RangePartition(InputPartition):
    def __init__(self, value: Range) -> None:
        super().__init__(value)


def read_range(partition: InputPartition | None, opts: Options, schema: StructType,
               typed: list[ColumnSchema] | None = None) -> Iterator[pa.RecordBatch]:
    """Spark asks for one partition, None, when a plan has no ranges: nothing to read then."""
    if partition is None:
        return iter(())
    if not typed:
        return arrow_batches(partition.value, opts, schema)
    return typed_batches(partition.value, opts, schema, typed)


def typed_batches(rng: Range, opts: Options, schema: StructType, typed: list[ColumnSchema]) -> Iterator[pa.RecordBatch]:
    """The range's batches with keys and values decoded through the registry (typed.py)."""
    final = to_arrow_schema(schema)
    decoders = [ColumnDecoder(c, opts, final.field(c.column).type) for c in typed]
    where = f"{rng.label}/{rng.partition}"
    for batch in arrow_batches(rng, opts, schema, raw_arrow_schema(final, typed)):
        yield decode_batch(batch, decoders, final, where, opts.permissive)


def arrow_batches(rng: Range, opts: Options, schema: StructType,
                  arrow_schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches in the source's schema.

    Batches are decoded together, a few MiB at a time, straight into
    column buffers (protocol.record_columns), never a Python object per record.
    """
    arrow_schema = arrow_schema or to_arrow_schema(schema)
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
