"""Record-batch compression codecs (attributes bits 0-2).

Snappy follows Kafka's Java client: xerial's block framing on write, and
either framing or a raw block on read, as librdkafka may send both.

`decompress_bounded` is for bytes from the network (produce validation): it
stops once the output passes a limit instead of trusting the data, so a
batch of a few KiB that inflates to GBs (a decompression bomb) is refused
having produced at most the limit. cramjam's one-shot calls decode a whole
stream before they can fail, so streaming decoders are used there: zlib for
gzip, python-zstandard's stream reader, python-lz4's frame decompressor with
max_length, and snappy's declared lengths, which are checked before decoding.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed records that cannot be decoded, or an unknown codec."""


class DecompressedTooLargeError(CompressionError):
    """Compressed records that inflate past the allowed size."""


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
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in _snappy_blocks(memoryview(data)))


def compress(codec: int, data: bytes) -> bytes:
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


def _snappy_raw_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its leading varint)."""
    value = shift = 0
    for pos in range(min(len(block), 5)):
        byte = block[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise CompressionError("snappy block without a valid length")


def _snappy_blocks(view: memoryview) -> list[memoryview]:
    """The raw snappy blocks of xerial-framed (Java client) or plain snappy data."""
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return [view]
    blocks = []
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError("truncated xerial snappy block")
        blocks.append(view[pos : pos + size])
        pos += size
    return blocks


def _too_large(codec: int, limit: int) -> DecompressedTooLargeError:
    return DecompressedTooLargeError(f"{Codec(codec).name} records decompress to more than {limit} bytes")


_CHUNK = 1 << 20  # streamed output per step: asking for the whole limit at once allocates it


def _gather(read: Callable[[], bytes], codec: int, limit: int) -> bytes:
    """Output chunks from `read` until it returns nothing, refused past `limit` bytes."""
    parts = []
    total = 0
    while chunk := read():
        total += len(chunk)
        if total > limit:
            raise _too_large(codec, limit)
        parts.append(chunk)
    return b"".join(parts)


def decompress_bounded(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """Decompressed records, never producing more than `limit` + 1 bytes on the way.

    Raises DecompressedTooLargeError past the limit and CompressionError for
    anything that does not decode completely (trailing garbage included).
    """
    view = memoryview(data)
    try:
        if codec == Codec.GZIP:
            inflater = zlib.decompressobj(wbits=31)
            out = inflater.decompress(view, limit + 1)
            if len(out) > limit:
                raise _too_large(codec, limit)
            if not inflater.eof or inflater.unused_data:
                raise CompressionError("GZIP records are truncated or followed by other bytes")
            return out
        if codec == Codec.ZSTD:
            with zstandard.ZstdDecompressor().stream_reader(view, read_across_frames=True) as reader:
                return _gather(lambda: reader.read(_CHUNK), codec, limit)
        if codec == Codec.LZ4:
            lz4_reader = lz4.frame.LZ4FrameDecompressor()
            pending = [view]

            def more() -> bytes:
                if lz4_reader.eof or (lz4_reader.needs_input and not pending):
                    return b""
                return lz4_reader.decompress(pending.pop() if pending else b"", max_length=_CHUNK)

            out = _gather(more, codec, limit)
            if not lz4_reader.eof or lz4_reader.unused_data:
                raise CompressionError("LZ4 records are truncated or followed by other bytes")
            return out
        if codec == Codec.SNAPPY:
            blocks = _snappy_blocks(view)
            if sum(_snappy_raw_length(block) for block in blocks) > limit:
                raise _too_large(codec, limit)
            return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)
        if codec == Codec.NONE:
            return bytes(view)
    except (zlib.error, zstandard.ZstdError, RuntimeError, cramjam.DecompressionError) as exc:
        raise CompressionError(f"cannot decompress {Codec(codec).name} records: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")
