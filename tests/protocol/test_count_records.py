"""count_records: what /metrics counts as messages out of a Fetch answer."""

from __future__ import annotations

from kafkacompat.protocol.records import ATTR_CONTROL, Record, build_batch, count_records, iter_records


def control(batch: bytes) -> bytes:
    """The same batch flagged as a control batch (attributes at offset 21; the CRC is not checked here)."""
    raw = bytearray(batch)
    raw[22] |= ATTR_CONTROL
    return bytes(raw)


def test_counts_the_records_of_whole_non_control_batches() -> None:
    three = build_batch([Record(b"k", b"v")] * 3)
    two = build_batch([Record(None, b"w")] * 2, base_offset=3)
    data = three + two
    assert count_records(data) == 5 == len(list(iter_records(data)))
    assert count_records(data + three[:40]) == 5  # a truncated trailing batch is not sent whole: not counted
    assert count_records(data + three[:-1]) == 5
    assert count_records(data + control(build_batch([Record(None, None)], base_offset=5))) == 5
    assert count_records(b"") == 0
