"""The fuzz targets: the broker's own code paths for untrusted bytes (see __main__.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import crc32c

from kafkacompat.handlers import HANDLERS, SUPPORTED
from kafkacompat.protocol.framing import FrameDecoder, FrameError
from kafkacompat.protocol.messages import MalformedRequestError, decode_request, parse_request_header
from kafkacompat.protocol.record_validation import validate_records
from kafkacompat.protocol.records import CRC_START, HEADER_SIZE, InvalidBatchError, split_batches

FUZZ_FRAME_LIMIT = 1 << 20  # frames larger than this are refused, as socket.request.max.bytes would
_LONG_MAX = 2**63 - 1


def decode_frame(frame: bytes) -> object | None:
    """What a connection does with one frame before a handler runs: the decoded request or None."""
    header = parse_request_header(frame)
    supported = SUPPORTED.get(header.api_key)
    handler = HANDLERS.get(header.api_key)
    if supported is None or handler is None or not supported[0] <= header.api_version <= supported[1]:
        return None  # the connection is closed with "unsupported" before any decode
    decode = getattr(handler, "decode", decode_request)
    return decode(header, frame)


def fuzz_frames(data: bytes) -> None:
    try:
        for frame in FrameDecoder(FUZZ_FRAME_LIMIT).feed(data):
            try:
                decode_frame(frame)
            except MalformedRequestError:
                continue
    except FrameError:
        pass


def fuzz_records(data: bytes) -> None:
    buf = bytearray(data)
    if len(buf) >= HEADER_SIZE:  # sign the first batch, so the walk is reached
        end = min(len(buf), 12 + int.from_bytes(buf[8:12], "big", signed=True)) if len(buf) >= 12 else len(buf)
        if end > CRC_START:
            buf[17:21] = crc32c.crc32c(bytes(buf[CRC_START:end])).to_bytes(4, "big")
    try:
        for pos, header in split_batches(bytes(buf)):
            validate_records(
                memoryview(buf)[pos : pos + header.size], header, int(time.time() * 1000), _LONG_MAX, _LONG_MAX,
                decompressed_limit=1 << 20,
            )
    except InvalidBatchError:
        pass


TARGETS: dict[str, Callable[[bytes], None]] = {"frames": fuzz_frames, "records": fuzz_records}
