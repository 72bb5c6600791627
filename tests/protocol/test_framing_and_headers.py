"""The protocol layer alone: bytes in, objects out, no sockets."""

from __future__ import annotations

import struct

import pytest
from kafkacompat.protocol.framing import FrameDecoder, FrameError, FrameTooLargeError, frame
from kafkacompat.protocol.messages import MalformedRequestError, encode_response, parse_request_header


def test_decoder_splits_frames_across_arbitrary_chunks() -> None:
    payloads = [b"a" * 5, b"", b"xyz" * 100]
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    got = []
    for i in range(0, len(stream), 7):
        got += decoder.feed(stream[i : i + 7])
    assert got == payloads and decoder.pending == 0


def test_decoder_enforces_the_size_limit_from_the_prefix() -> None:
    with pytest.raises(FrameTooLargeError, match="exceeds the limit of 10 bytes"):
        FrameDecoder(max_bytes=10).feed(struct.pack(">i", 11))
    with pytest.raises(FrameError, match="negative"):
        FrameDecoder().feed(struct.pack(">i", -1))


def test_request_header_v1_and_v2() -> None:
    v1 = struct.pack(">hhih", 3, 1, 42, 3) + b"cli" + b"body"
    header = parse_request_header(v1)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 42, "cli")
    assert v1[header.body_offset :] == b"body"
    # Metadata v9 is flexible: header v2 carries tagged fields (here one, tag 5, 2 bytes)
    v2 = struct.pack(">hhih", 3, 9, 7, -1) + b"\x01\x05\x02zz" + b"rest"
    header = parse_request_header(v2)
    assert header.client_id is None and v2[header.body_offset :] == b"rest"


@pytest.mark.parametrize("raw", [b"\x00\x03", struct.pack(">hhih", 3, 1, 1, 50) + b"short"])
def test_truncated_headers_are_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        parse_request_header(raw)


def test_a_header_varint_longer_than_five_bytes_is_malformed() -> None:
    """Kafka's readUnsignedVarint stops at 5 bytes; a 6th continuation byte is refused, not read on."""
    flexible = struct.pack(">hhih", 3, 9, 7, -1)
    five = b"\x80\x80\x80\x80\x00"  # zero tagged fields, padded to the longest legal form
    assert parse_request_header(flexible + five + b"rest").body_offset == len(flexible) + 5
    with pytest.raises(MalformedRequestError, match="varint longer than 5 bytes"):
        parse_request_header(flexible + b"\x80\x80\x80\x80\x80\x00" + b"rest")


def test_response_headers_v0_v1_and_api_versions_always_v0() -> None:
    assert encode_response(3, 1, 9, b"B") == struct.pack(">ii", 5, 9) + b"B"
    assert encode_response(3, 9, 9, b"B") == struct.pack(">ii", 6, 9) + b"\x00B"
    assert encode_response(18, 3, 9, b"B") == struct.pack(">ii", 5, 9) + b"B"
