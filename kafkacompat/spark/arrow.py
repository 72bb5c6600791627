"""Decoded record columns as Arrow record batches in the source's schema.

The buffers of protocol.record_columns are Arrow's own layout, so each
column is wrapped where it lies (no copy, no Python object per row); the
topic and partition columns repeat one value.
"""

from __future__ import annotations

import pyarrow as pa

from ..protocol.record_columns import Columns


def record_batch(columns: Columns, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """The rows of `columns`, all of one topic partition, with the fields `schema` names."""
    rows = columns.rows
    arrays = {
        "key": _binary(pa.binary(), rows, columns.key_valid, columns.key_offsets, columns.key_data),
        "value": _binary(pa.binary(), rows, columns.value_valid, columns.value_offsets, columns.value_data),
        "topic": pa.repeat(pa.scalar(topic, pa.string()), rows),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), rows),
        "offset": _numbers(pa.int64(), rows, columns.offsets),
        "timestamp": _numbers(schema.field("timestamp").type, rows, columns.timestamps),
        "timestampType": _numbers(pa.int32(), rows, columns.types),
    }
    if "headers" in schema.names:
        arrays["headers"] = _headers(columns, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def _binary(kind: pa.DataType, rows: int, valid: bytes | None, offsets: bytes, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(
        kind, rows, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)])


def _numbers(kind: pa.DataType, rows: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)])


def _headers(columns: Columns, kind: pa.ListType) -> pa.Array:
    """list<struct<key: string, value: binary>>: a record's headers, in order; null when it has none."""
    assert columns.header_valid is not None and columns.header_offsets is not None
    assert columns.header_key_offsets is not None
    count = len(columns.header_key_offsets) // 4 - 1
    keys = _binary(pa.string(), count, None, columns.header_key_offsets, columns.header_key_data or b"")
    keys.validate(full=True)  # header keys are UTF-8 strings; a reader must not hand on anything else as one
    values = _binary(pa.binary(), count, columns.header_value_valid, columns.header_value_offsets or b"",
                     columns.header_value_data or b"")
    entries = pa.StructArray.from_arrays([keys, values], fields=list(kind.value_type))
    return pa.Array.from_buffers(kind, columns.rows, [pa.py_buffer(columns.header_valid), pa.py_buffer(columns.header_offsets)],
                                 children=[entries])
