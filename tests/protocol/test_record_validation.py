"""Record validation refuses what Kafka's LogValidator refuses, in C and in Python alike."""

from __future__ import annotations

import random
import time

import pytest
from kafkacompat.protocol import record_validation
from kafkacompat.protocol.compression import Codec
from kafkacompat.protocol.record_validation import (
    CORRUPT,
    INVALID,
    TIMESTAMP,
    TOO_LARGE,
    RecordValidationError,
    validate_records,
    walk_records,
)
from kafkacompat.protocol.records import HEADER_SIZE, Record, build_batch, read_header

from tests import poison_batches as poison

LONG_MAX = 2**63 - 1
HOUR = 3_600_000

EXPECTED = {
    "junk_records": CORRUPT,
    "gzip_flag_over_plain_body": CORRUPT,
    "count_more_than_records": INVALID,
    "count_fewer_than_records": INVALID,
    "same_offset_delta": INVALID,
    "trailing_bytes_after_records": INVALID,
    "record_length_past_the_end": INVALID,
    "timestamp_too_far_ahead": TIMESTAMP,
    "timestamp_far_ahead_in_one_record": TIMESTAMP,
    "gzip_count_mismatch": INVALID,
    "zstd_count_mismatch": INVALID,
    "gzip_bomb": TOO_LARGE,
}


def _check(batch: bytes, **kwargs) -> None:
    validate_records(batch, read_header(batch), int(time.time() * 1000), LONG_MAX, HOUR, **kwargs)


@pytest.fixture(params=["c", "python"])
def walker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "c":
        if record_validation.scan_records is None:
            pytest.skip("the C record walk (_record_scan) is not built here; the Python walk is tested")
    else:
        monkeypatch.setattr(record_validation, "scan_records", None)
    return request.param


def test_every_poison_batch_has_an_expectation() -> None:
    assert set(EXPECTED) == set(poison.POISON)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_poison_batches_are_refused(name: str, walker: str) -> None:
    with pytest.raises(RecordValidationError) as refused:
        _check(poison.POISON[name]())
    assert refused.value.kind == EXPECTED[name], str(refused.value)


@pytest.mark.parametrize("codec", list(Codec))
def test_good_batches_pass(codec: Codec, walker: str) -> None:
    records = [
        Record(b"k%d" % i if i % 3 else None, bytes(random.randbytes(i * 37)), [("h", b"v"), ("n", None)],
               int(time.time() * 1000) - i)
        for i in range(200)
    ]
    _check(build_batch(records, compression=codec))
    _check(poison.good())
    _check(poison.compressed(codec))


def test_the_timestamp_error_names_the_record_as_kafka_does() -> None:
    with pytest.raises(RecordValidationError) as refused:
        _check(poison.timestamp_far_ahead_in_one_record())
    assert refused.value.record_index == 1
    assert "of message with offset 1 is out of range" in str(refused.value)


def test_timestamps_are_not_checked_for_log_append_time_topics() -> None:
    _check(poison.timestamp_too_far_ahead(), check_timestamps=False)


def test_timestamps_too_old_are_refused_when_the_topic_says_so() -> None:
    batch = poison.good()
    header = read_header(batch)
    with pytest.raises(RecordValidationError, match="out of range"):
        validate_records(batch, header, header.base_timestamp + 10 * HOUR, HOUR, HOUR)


def test_a_bomb_stops_at_the_limit_without_inflating_whole() -> None:
    bomb = poison.gzip_bomb(32 << 20)
    with pytest.raises(RecordValidationError, match="more than 1048576 bytes"):
        validate_records(bomb, read_header(bomb), 0, LONG_MAX, LONG_MAX, decompressed_limit=1 << 20)


def test_c_and_python_agree_on_mutated_batches() -> None:
    """Differential: every byte flip of valid records gets the same verdict from both walks."""
    scan = record_validation.scan_records
    if scan is None:
        pytest.skip("the C record walk (_record_scan) is not built here")
    rng = random.Random(20)
    batch = build_batch([Record(b"key", b"value-%d" % i, [("h", b"x")], 1000 + i) for i in range(20)])
    header = read_header(batch)
    for _ in range(3000):
        mutated = bytearray(batch)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(HEADER_SIZE, len(mutated))] = rng.randrange(256)
        mutated = bytes(mutated)
        c_verdict = scan(mutated, HEADER_SIZE, header.size, header.record_count)
        try:
            py_verdict = walk_records(mutated, HEADER_SIZE, header.size, header.record_count)
        except RecordValidationError:
            py_verdict = None
        assert c_verdict == py_verdict, mutated.hex()
