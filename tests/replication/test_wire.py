"""The private replication API on the wire: hidden from stock clients, refusing bad input."""

from __future__ import annotations

import json
import struct

from kafkacompat.protocol.admin_api import decode_response
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.replication_api import REPLICATE_KEY

from tests.wire import Wire, request_class


def _body(obj: dict, payload: bytes = b"") -> bytes:
    meta = json.dumps(obj).encode()
    return struct.pack(">i", len(meta)) + meta + payload


def test_replicate_key_is_never_advertised_and_answers_hello(broker):
    with Wire(broker.bootstrap_servers) as wire:
        versions = wire.request(18, 3, make(request_class(18, 3), client_software_name="wire",
                                            client_software_version="1"))
        assert REPLICATE_KEY not in {k.api_key for k in versions.api_keys}
        wire.send(REPLICATE_KEY, 0, _body({"op": "hello", "stream": "/default"}))
        _, reply = decode_response(wire.read_frame())
    assert reply.error_code == 0 and reply.result["stream_exists"] is True
    assert reply.result["uuid"] == str(broker.server.store.store_id)


def test_corrupt_batch_is_refused_with_nothing_written(broker):
    broker.create_topic("t")
    produced = broker.produce("t", b"real")
    good = bytes(broker.call(broker.server.store.partition("/default", "t", 0).read(0, 1 << 20)))
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF  # the CRC no longer matches
    damaged[0:8] = (1).to_bytes(8, "big")  # shipped as offset 1
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(REPLICATE_KEY, 0, _body({"op": "append", "stream": "/default", "topic": "t", "partition": 0,
                                           "base": 1, "path": ["elsewhere"]}, bytes(damaged)))
        _, reply = decode_response(wire.read_frame())
    assert reply.error_code != 0 and "CRC" in reply.error
    assert broker.server.store.partition("/default", "t", 0).high_watermark == produced.offset + 1


def test_malformed_requests(broker):
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(REPLICATE_KEY, 0, _body({"op": "append", "stream": "/default"}))
        _, reply = decode_response(wire.read_frame())
        assert reply.error_code == 42 and "malformed append request" in reply.error
        wire.send(REPLICATE_KEY, 0, _body({"op": "explode"}))
        _, reply = decode_response(wire.read_frame())
        assert reply.error_code == 42 and "unknown replication operation" in reply.error
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(REPLICATE_KEY, 0, b"\x00\x00\x00\x09not json!")
        assert wire.is_closed()
