"""Record-batch compression codecs (attributes bits 0-2).

Only the places that must look inside records use these (timestamp search,
the test broker's helpers); the produce and fetch paths pass bytes through.
Snappy follows Kafka's Java client: xerial's block framing on write, and
either framing or a raw block on read, as librdkafka may send both.
"""

from __future__ import annotations

import enum
import struct

import cramjam


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed records that cannot be decoded, or an unknown codec."""


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError("truncated xerial snappy block")
        out += cramjam.snappy.decompress_raw(view[pos : pos + size])
        pos += size
    return bytes(out)


def compress(codec: Codec, data: bytes) -> bytes:
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == Codec.NONE:
            return bytes(data)
        if codec == Codec.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec == Codec.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Codec.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"cannot decompress {Codec(codec).name} records: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")
