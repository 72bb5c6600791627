"""The private admin API on the wire: served on the broker port, hidden from stock clients."""

from __future__ import annotations

import pytest
from kafkacompat.protocol.admin_api import STREAM_ADMIN_KEY, decode_response
from kafkacompat.protocol.messages import make

from tests.wire import Wire, request_class


def test_admin_key_answers_but_is_never_advertised(broker):
    with Wire(broker.bootstrap_servers) as wire:
        versions = wire.request(18, 3, make(request_class(18, 3), client_software_name="wire",
                                            client_software_version="1"))
        assert STREAM_ADMIN_KEY not in {k.api_key for k in versions.api_keys}
        sent = wire.send(STREAM_ADMIN_KEY, 0, b'{"op":"stream.info","path":"/default"}')
        correlation, reply = decode_response(wire.read_frame())
    assert correlation == sent
    assert reply.error_code == 0
    assert reply.result["path"] == "/default"


def test_unknown_operation_is_an_error_answer(broker):
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(STREAM_ADMIN_KEY, 0, b'{"op":"stream.explode"}')
        _, reply = decode_response(wire.read_frame())
    assert reply.error_code == 42  # INVALID_REQUEST
    assert reply.error == "unknown admin operation 'stream.explode'"


def test_a_body_that_is_not_json_closes_the_connection(broker):
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(STREAM_ADMIN_KEY, 0, b"\x00\x01not json")
        assert wire.is_closed()


def test_an_unknown_admin_version_closes_the_connection(broker):
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(STREAM_ADMIN_KEY, 1, b'{"op":"stream.list"}')
        assert wire.is_closed()


def test_an_answer_carries_raw_bytes_after_its_json_and_a_bare_one_none() -> None:
    """A worker's records travel to another worker as they are, after the answer's JSON (not as base64
    inside it, which cost a link reading worker 1's partitions two thirds of its speed)."""
    from kafkacompat.protocol.admin_api import (
        AdminMessageError,
        decode_response_with_payload,
        encode_response_body,
        encode_response_with_payload,
    )

    records = b'{"not": "json"}' + bytes(range(256))  # raw bytes may look like anything
    framed = b"\x00\x00\x00\x07" + encode_response_with_payload(0, None, {"high_watermark": 5}, records)
    correlation, reply, payload = decode_response_with_payload(framed)
    assert (correlation, reply.error_code, reply.result, bytes(payload)) == (7, 0, {"high_watermark": 5}, records)
    refused = b"\x00\x00\x00\x08" + encode_response_body(3, "no such topic", None)
    correlation, reply, payload = decode_response_with_payload(refused)
    assert (correlation, reply.error_code, reply.error, bytes(payload)) == (8, 3, "no such topic", b"")
    with pytest.raises(AdminMessageError):
        decode_response_with_payload(framed[:12])
