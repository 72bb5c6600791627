"""Record columns become Arrow batches in the source's schema with the values Spark's Kafka source gives."""

from __future__ import annotations

import datetime

from kafkacompat.protocol.record_columns import Records, record_columns
from kafkacompat.protocol.records import Record, build_batch

from kafkacompat.spark.arrow import record_batch
from kafkacompat.spark.source import KafkacompatDataSource

UTC = datetime.timezone.utc


def test_rows_keep_every_field_and_a_record_without_headers_has_null_headers() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    records = [Record(b"k", b"v1", [("a", b"1"), ("b", None)], 1_700_000_000_123),
               Record(None, None, [], 1_700_000_000_456),
               Record(b"", b"", [("ü", b"")], 1_700_000_000_789)]
    batch = build_batch(records, base_offset=40, compression="zstd")
    options = {"dataDir": "unused", "subscribe": "t", "includeHeaders": "true"}
    schema = to_arrow_schema(KafkacompatDataSource(options).schema())

    columns = record_columns([Records.of(memoryview(batch))], 40, 43, True)
    rows = record_batch(columns, "/s:t", 2, schema).to_pylist()

    def at(ms: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(ms / 1000, UTC)

    assert rows == [
        {"key": b"k", "value": b"v1", "topic": "/s:t", "partition": 2, "offset": 40,
         "timestamp": at(1_700_000_000_123), "timestampType": 0,
         "headers": [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]},
        {"key": None, "value": None, "topic": "/s:t", "partition": 2, "offset": 41,
         "timestamp": at(1_700_000_000_456), "timestampType": 0, "headers": None},
        {"key": b"", "value": b"", "topic": "/s:t", "partition": 2, "offset": 42,
         "timestamp": at(1_700_000_000_789), "timestampType": 0, "headers": [{"key": "ü", "value": b""}]},
    ]
