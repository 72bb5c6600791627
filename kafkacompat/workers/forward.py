"""A worker other than 0 has a topic auto-created by worker 0, the one that writes the catalog.

Kafka's brokers forward auto-creation to their controller as a CreateTopics
request; a worker does the same over worker 0's Kafka port (with TLS and a
SASL login when --replication-client-config asks for them, as replica
links connect), then takes in the catalog, so the Metadata request that
asked for the topic is answered with it. Without this, a client that
reached only worker 1 waited for a topic nobody made.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import kio.schema.create_topics.v4.request as create_v4
import kio.schema.create_topics.v4.response as created_v4
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kafkacompat.protocol.messages import encode_body, make

from ..security.client import ClientSecurity

CREATE_TOPICS = 19
VERSION = 4  # not flexible: a plain header, and every field asked here exists
CLIENT_ID = b"kafkacompat-worker"
_SIZE = struct.Struct(">i")


class ForwardError(Exception):
    """Worker 0 could not be asked or refused: the message says which."""


async def create_at_controller(host: str, port: int, name: str, partitions: int, security: ClientSecurity,
                               timeout: float = 10.0) -> None:
    """Ask the controller at host:port to create topic `name` (a Kafka name: plain, or /stream:topic)
    with `partitions` partitions; one that exists already is no error."""
    try:
        answer = await asyncio.wait_for(_ask(host, port, name, partitions, security, timeout), timeout)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ForwardError(f"cannot reach worker 0 at {host}:{port}: {exc or type(exc).__name__}") from None
    result = answer.topics[0]
    if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
        raise ForwardError(f"worker 0 did not create {name}: {result.error_code.name} {result.error_message or ''}")


async def _ask(host: str, port: int, name: str, partitions: int, security: ClientSecurity, timeout: float) -> Any:
    reader, writer = await security.open_stream(host, port, timeout)
    try:
        topic = make(create_v4.CreatableTopic, name=name, num_partitions=partitions, replication_factor=-1,
                     assignments=(), configs=())
        body = encode_body(make(create_v4.CreateTopicsRequest, topics=(topic,), timeout=datetime.timedelta(seconds=timeout),
                                validate_only=False))
        head = struct.pack(">hhih", CREATE_TOPICS, VERSION, 1, len(CLIENT_ID)) + CLIENT_ID
        writer.write(_SIZE.pack(len(head) + len(body)) + head + body)
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
        frame = await reader.readexactly(size)
        answer, _ = entity_reader(created_v4.CreateTopicsResponse)(frame, 4)
        return answer
    finally:
        writer.close()
