"""Request bodies are checked against their frame before kio allocates from them."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import pytest
from kafkacompat.protocol.messages import MalformedRequestError, decode_request, parse_request_header
from kafkacompat.protocol.varints import uvarint

from tests.hostile_frames import create_topics_null_topics


def _decode(frame_with_size: bytes):
    frame = frame_with_size[4:]
    return decode_request(parse_request_header(frame), frame)


def test_the_36_byte_frame_is_refused_without_allocating() -> None:
    # In a child process: if the bounds check ever lets it through, kio's
    # allocation failure aborts the process, which must fail this test, not the run.
    code = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from kafkacompat.protocol.messages import MalformedRequestError, decode_request, parse_request_header
        from tests.hostile_frames import create_partitions_207gb
        frame = create_partitions_207gb()[4:]
        try:
            decode_request(parse_request_header(frame), frame)
        except MalformedRequestError as exc:
            print("refused:", exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "broker_ids" in done.stdout


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_null_in_a_non_nullable_array_never_reaches_a_handler(version: int) -> None:
    with pytest.raises(MalformedRequestError, match="null array topics"):
        _decode(create_topics_null_topics(version))


def test_nullable_array_may_be_null() -> None:
    # CreatePartitions v2: `assignments` is nullable
    header = struct.pack(">hhih", 37, 2, 1, -1) + b"\x00"
    body = uvarint(2) + uvarint(2) + b"t" + struct.pack(">i", 3) + uvarint(0) + b"\x00" + struct.pack(">i?", 1000, False) + b"\x00"
    request = _decode(struct.pack(">i", len(header + body)) + header + body)
    assert request.topics[0].assignments is None


def test_string_longer_than_the_frame_is_refused() -> None:
    header = struct.pack(">hhih", 37, 2, 1, -1) + b"\x00"
    body = uvarint(2) + uvarint(1_000_000) + b"t"
    with pytest.raises(MalformedRequestError, match="name of 999999 bytes"):
        _decode(struct.pack(">i", len(header + body)) + header + body)


def test_tagged_field_longer_than_the_frame_is_refused() -> None:
    header = struct.pack(">hhih", 18, 3, 1, -1) + b"\x00"
    body = uvarint(2) + b"a" + uvarint(2) + b"1" + uvarint(1) + uvarint(0) + uvarint(1 << 30)
    with pytest.raises(MalformedRequestError, match="tagged field 0"):
        _decode(struct.pack(">i", len(header + body)) + header + body)


def test_classic_array_length_past_the_frame_is_refused() -> None:
    header = struct.pack(">hhih", 3, 1, 1, -1)  # Metadata v1: topics int32 array
    body = struct.pack(">i", 2**31 - 1)
    with pytest.raises(MalformedRequestError, match="2147483647 elements"):
        _decode(struct.pack(">i", len(header + body)) + header + body)


@pytest.mark.parametrize("version", [3, 9])
def test_produce_with_null_topic_data_is_refused(version: int) -> None:
    from kafkacompat.handlers.produce import decode

    flexible = version >= 9
    header = struct.pack(">hhih", 0, version, 1, -1) + (b"\x00" if flexible else b"")
    txn = b"\x00" if flexible else struct.pack(">h", -1)
    topics = uvarint(0) if flexible else struct.pack(">i", -1)
    frame = header + txn + struct.pack(">hi", 1, 1000) + topics + (b"\x00" if flexible else b"")
    with pytest.raises(MalformedRequestError, match="null topics"):
        decode(parse_request_header(frame), frame)


def test_a_request_of_millions_of_tiny_elements_is_refused_before_decoding() -> None:
    # Metadata v1 naming 2,000,000 empty topics: 4 MB of frame, ~125 MB once decoded
    header = struct.pack(">hhih", 3, 1, 1, -1)
    body = struct.pack(">i", 2_000_000) + b"\x00\x00" * 2_000_000
    with pytest.raises(MalformedRequestError, match="more than 1000000 array elements"):
        _decode(struct.pack(">i", len(header + body)) + header + body)
    fits = struct.pack(">i", 500_000) + b"\x00\x01t" * 500_000
    assert len(_decode(struct.pack(">i", len(header + fits)) + header + fits).topics) == 500_000
