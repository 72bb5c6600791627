"""Record batches with a valid CRC-32C and contents Kafka's log validator refuses.

Each builder returns one v2 batch as a producer would send it; the CRC is
always right, so only a look at the records can tell them from good ones.
"""

from __future__ import annotations

import struct
import time

import cramjam
import crc32c
from kafkacompat.protocol.compression import Codec, compress
from kafkacompat.protocol.records import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2
from kafkacompat.protocol.varints import uvarint


def _zigzag(value: int) -> bytes:
    """A signed varint, as record fields are written."""
    return uvarint((value << 1) ^ (value >> 63))


def record(offset_delta: int, value: bytes, ts_delta: int = 0, key: bytes | None = None) -> bytes:
    body = b"\x00" + _zigzag(ts_delta) + _zigzag(offset_delta)
    body += _zigzag(-1) if key is None else _zigzag(len(key)) + key
    body += _zigzag(len(value)) + value + _zigzag(0)
    return _zigzag(len(body)) + body


def batch(
    payload: bytes,
    count: int,
    *,
    codec: int = 0,
    last_offset_delta: int | None = None,
    base_ts: int | None = None,
    max_ts: int | None = None,
) -> bytes:
    """A batch around `payload` (records, already compressed if codec says so), CRC set."""
    now = int(time.time() * 1000) if base_ts is None else base_ts
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, MAGIC_V2, 0, codec,
        count - 1 if last_offset_delta is None else last_offset_delta, now,
        now if max_ts is None else max_ts, -1, -1, -1, count,
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def good(count: int = 3) -> bytes:
    return batch(b"".join(record(i, b"v%d" % i) for i in range(count)), count)


def junk_records() -> bytes:
    return batch(b"\xde\xad\xbe\xef" * 8, 1)


def gzip_flag_over_plain_body() -> bytes:
    return batch(b"".join(record(i, b"v") for i in range(2)), 2, codec=Codec.GZIP)


def count_more_than_records() -> bytes:
    return batch(b"".join(record(i, b"v") for i in range(2)), 3)


def count_fewer_than_records() -> bytes:
    return batch(b"".join(record(i, b"v") for i in range(3)), 2)


def same_offset_delta() -> bytes:
    return batch(b"".join(record(0, b"v%d" % i) for i in range(3)), 3)


def trailing_bytes_after_records() -> bytes:
    return batch(record(0, b"v") + b"\x00\x00", 1)


def record_length_past_the_end() -> bytes:
    return batch(_zigzag(1000) + record(0, b"v")[1:], 1)


def timestamp_too_far_ahead(ahead_ms: int = 2 * 3600 * 1000) -> bytes:
    ts = int(time.time() * 1000) + ahead_ms
    return batch(record(0, b"v"), 1, base_ts=ts, max_ts=ts)


def timestamp_far_ahead_in_one_record(ahead_ms: int = 2 * 3600 * 1000) -> bytes:
    """The header's timestamps look fine; the second record's delta does not."""
    return batch(record(0, b"a") + record(1, b"b", ts_delta=ahead_ms), 2)


def gzip_bomb(decompressed: int = 256 << 20) -> bytes:
    """One record claiming a `decompressed`-byte value, of zeros, gzip-compressed to ~KBs."""
    head = record(0, b"")[:-2]  # everything up to the value length (value b"", 0 headers)
    body = head[1:]  # without the record length varint
    value_len = _zigzag(decompressed)
    record_len = _zigzag(len(body) + len(value_len) + decompressed + 1)
    prefix = record_len + body + value_len
    compressor = cramjam.gzip.Compressor()
    compressor.compress(prefix)
    zeros = bytes(1 << 20)
    for _ in range(decompressed >> 20):
        compressor.compress(zeros)
    compressor.compress(b"\x00")
    return batch(bytes(compressor.finish()), 1, codec=Codec.GZIP)


def compressed(codec: Codec, count: int = 3) -> bytes:
    return batch(compress(codec, b"".join(record(i, b"v%d" % i) for i in range(count))), count, codec=codec)


def compressed_count_mismatch(codec: Codec) -> bytes:
    return batch(compress(codec, b"".join(record(i, b"v") for i in range(2))), 3, codec=codec)


POISON = {
    "junk_records": junk_records,
    "gzip_flag_over_plain_body": gzip_flag_over_plain_body,
    "count_more_than_records": count_more_than_records,
    "count_fewer_than_records": count_fewer_than_records,
    "same_offset_delta": same_offset_delta,
    "trailing_bytes_after_records": trailing_bytes_after_records,
    "record_length_past_the_end": record_length_past_the_end,
    "timestamp_too_far_ahead": timestamp_too_far_ahead,
    "timestamp_far_ahead_in_one_record": timestamp_far_ahead_in_one_record,
    "gzip_count_mismatch": lambda: compressed_count_mismatch(Codec.GZIP),
    "zstd_count_mismatch": lambda: compressed_count_mismatch(Codec.ZSTD),
    "gzip_bomb": gzip_bomb,
}
