"""`format("kafkacompat")`: Spark reads a stream's partitionlets where they lie.

A Python data source (Spark 4's `pyspark.sql.datasource`): the driver
plans offset ranges from the chain manifests and indexes (plan.py); each
task opens its partitionlet files read-only, checks every batch's CRC,
decodes records (every codec) straight into Arrow column buffers (C, see
protocol/record_columns.py) and hands Spark Arrow batches (scan.py);
stream.py reads streams. No broker is
in the data path and no JVM connector jar is needed. The schema and
column types are those of Spark's Kafka source.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
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

from .options import Options, parse_options

if TYPE_CHECKING:
    import pyarrow as pa

    from .typed import ColumnSchema

# Spark imports this module in a fresh planning worker for every query (to
# learn the schema, to plan partitions): the store, record decoding and
# pyarrow are imported where reading or planning needs them, not here.

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


class KafkacompatDataSource(DataSource):
    """Registered as `kafkacompat` by `kafkacompat.spark.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        return "kafkacompat"

    def schema(self) -> StructType:
        opts = parse_options(self.options)
        fields = BASE_FIELDS + ([HEADERS_FIELD] if opts.include_headers else [])
        if opts.decode:  # typed rows: the registry's schemas are read from the store (typed.py)
            from .typed import column_schemas, spark_fields

            fields = spark_fields(fields, column_schemas(opts), opts.permissive)
        return StructType(fields)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options)
        return BatchReader(opts, schema, _typed(opts, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream import StreamReader

        opts = parse_options(self.options)
        return StreamReader(opts, schema, _typed(opts, schema))


def _typed(opts: Options, schema: StructType) -> list[ColumnSchema]:
    if not opts.decode:
        return []
    from .typed import column_schemas

    return column_schemas(opts, schema)


class BatchReader(DataSourceReader):
    def __init__(self, opts: Options, schema: StructType, typed: list[ColumnSchema] | None = None) -> None:
        self.opts = opts
        self.schema = schema
        self.typed = typed or []

    def partitions(self) -> Sequence[InputPartition]:
        from .plan import batch_plan
        from .scan import RangePartition

        return [RangePartition(r) for r in batch_plan(self.opts)]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        from .scan import read_range

        return read_range(partition, self.opts, self.schema, self.typed)
