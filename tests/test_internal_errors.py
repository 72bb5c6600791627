"""A bug met while serving is told with what it was serving: the request (API, version), the connection and
the principal, and counted on /metrics. And the bug the network fuzzer found (seed 3) stays fixed."""

from __future__ import annotations

import logging
import socket
import struct
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from kafkacompat.protocol.messages import encode_body
from kio.schema.metadata.v10.request import MetadataRequest, MetadataRequestTopic

from kafkacompat.handlers import metadata
from kafkacompat.testing import Broker


@pytest.fixture(scope="module")
def broker():
    with Broker(http_port=0) as running:
        yield running


def _metadata_v10_frame(name: str | None) -> bytes:
    """The fuzzer's find: a Metadata v10 request naming a topic null (v10 requests allow it, responses do not)."""
    body = encode_body(MetadataRequest(topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=name),),
                                       allow_auto_topic_creation=False,
                                       include_cluster_authorized_operations=False,
                                       include_topic_authorized_operations=False))
    client = b"fuzz-seed"
    header = struct.pack(">hhih", 3, 10, 1, len(client)) + client + b"\x00"  # header v2: tagged fields
    return struct.pack(">i", len(header) + len(body)) + header + body


def _answer(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        return sock.recv(1 << 16)


def test_metadata_v10_with_a_null_topic_name_is_refused_not_a_traceback(broker, caplog):
    caplog.set_level(logging.INFO)
    assert _answer(broker.port, _metadata_v10_frame(None)) == b""  # closed, as for any malformed request
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("a topic name is null; topic ids need v12" in r.getMessage() for r in caplog.records)
    assert _answer(broker.port, _metadata_v10_frame("named"))  # the same request with a name is answered
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("after-null-name", b"x")
    assert producer.flush(15) == 0


def test_an_internal_error_names_request_connection_principal_and_is_counted(broker, caplog, monkeypatch):
    async def broken(ctx, request):
        raise RuntimeError("a bug")

    monkeypatch.setattr(metadata, "handle", broken)
    caplog.set_level(logging.ERROR)
    assert _answer(broker.port, _metadata_v10_frame("named")) == b""
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    message = record.getMessage()
    assert "internal error in Metadata v10 (correlation id 1, client fuzz-seed) from 127.0.0.1:" in message
    assert "(User:ANONYMOUS on PLAINTEXT)" in message and record.exc_info is not None
    with urllib.request.urlopen(f"{broker.http_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    assert ('kafkacompat_request_errors_total{api="Metadata",api_key="3",error="UNKNOWN_SERVER_ERROR",version="10"} 1.0'
            in text)
