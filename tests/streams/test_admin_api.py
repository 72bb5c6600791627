"""The private admin API on the wire: served on the broker port, hidden from stock clients."""

from __future__ import annotations

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
