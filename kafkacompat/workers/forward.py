"""A worker other than 0 has worker 0, the one that writes the catalog, make the catalog changes
clients ask of it.

Kafka's brokers forward auto-creation (as a CreateTopics request) and config
changes to their controller; a worker does the same on worker 0's Unix
socket (channel.py: as the broker itself, once the client's rights were
checked where it asked), then takes in the catalog, so the request
is answered with the change in place. Without this, a client that reached
only worker 1 waited for a topic nobody made, and a topic config change sent
to worker 1 (Java's admin client sends it to any broker) was refused.

Every request a worker sends another (these, and the WorkerState, relayed,
transaction and marker requests of view.py and txn_forward.py) goes on the
connections its view keeps to the others (cluster/peers.py).
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import kio.schema.create_topics.v4.request as create_v4
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kafkacompat.protocol.messages import encode_body, make, request_header, response_schema
from kafkacompat.protocol.versions import is_flexible

from ..cluster.peers import Peers

CREATE_TOPICS = 19
CLIENT_ID = b"kafkacompat-worker"
_SIZE = struct.Struct(">i")


class ForwardError(Exception):
    """Worker 0 could not be asked or refused: the message says which."""


async def create_at_controller(host: str, port: int, name: str, partitions: int, peers: Peers,
                               timeout: float = 10.0) -> None:
    """Ask the controller at host:port to create topic `name` (a Kafka name: plain, or /stream:topic)
    with `partitions` partitions; one that exists already is no error."""
    topic = make(create_v4.CreatableTopic, name=name, num_partitions=partitions, replication_factor=-1,
                 assignments=(), configs=())
    request = make(create_v4.CreateTopicsRequest, topics=(topic,), timeout=datetime.timedelta(seconds=timeout),
                   validate_only=False)
    answer = await forward(host, port, CREATE_TOPICS, 4, request, peers, timeout)
    result = answer.topics[0]
    if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
        raise ForwardError(f"worker 0 did not create {name}: {result.error_code.name} {result.error_message or ''}")


async def forward(host: str, port: int, api_key: int, version: int, request: Any, peers: Peers,
                  timeout: float = 10.0) -> Any:
    """The answer of the worker at host:port (worker 0 mostly) to `request` (a kio request of `api_key` at
    `version`); ForwardError when it cannot be reached in `timeout` seconds."""
    try:
        return await asyncio.wait_for(_ask(host, port, api_key, version, request, peers, timeout), timeout)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ForwardError(f"cannot reach the worker at {host}:{port}: {exc or type(exc).__name__}") from None


async def _ask(host: str, port: int, api_key: int, version: int, request: Any, peers: Peers,
               timeout: float) -> Any:
    head = request_header(api_key, version, 1, CLIENT_ID)
    body = encode_body(request)
    frame = await peers.exchange(host, port, _SIZE.pack(len(head) + len(body)) + head + body, timeout)
    answer, _ = entity_reader(response_schema(api_key, version))(frame, 5 if is_flexible(api_key, version) else 4)
    return answer

