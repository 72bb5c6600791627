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
transaction and marker requests of view.py and txn_forward.py) goes through
`Peers`, which keeps the connections open between requests, as Kafka's
brokers keep theirs to each other: opening one per request cost both
workers an accept, a connection's set-up and, over TCP with a login, a SASL
exchange, on paths a client waits on (a transaction's verification and
markers, share acknowledgements, the console's reads of another worker).
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any, Protocol

import kio.schema.create_topics.v4.request as create_v4
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kafkacompat.protocol.messages import encode_body, make, request_header, response_schema
from kafkacompat.protocol.versions import is_flexible

CREATE_TOPICS = 19
CLIENT_ID = b"kafkacompat-worker"
_SIZE = struct.Struct(">i")
IDLE_KEPT = 16  # idle connections kept to each other worker (more are opened while requests overlap)


class Connects(Protocol):
    """How a worker connects to another: ClientSecurity (TCP, with TLS and a login when configured) or the
    workers' own channel (channel.WorkerChannel)."""

    async def open_stream(self, host: str, port: int, timeout: float
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...


class ForwardError(Exception):
    """Worker 0 could not be asked or refused: the message says which."""


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Peers:
    """The connections a worker keeps to the other workers, opened with `connects` when none is idle.

    A connection carries one request at a time and goes back to the idle ones
    once its answer is read; one whose request failed, timed out or was
    cancelled is closed (its answer could still come and be taken for the
    next one's).
    """

    def __init__(self, connects: Connects, idle_kept: int = IDLE_KEPT) -> None:
        self.connects = connects
        self._idle_kept = idle_kept
        self._idle: dict[tuple[str, int], list[Stream]] = {}
        self.opened = 0  # connections opened so far

    async def exchange(self, host: str, port: int, request: bytes, timeout: float) -> bytes:
        """Send one whole request frame (size prefix included) to the worker at host:port; its answer's
        frame, without the size prefix. A request that met the end of a kept connection before any of
        its answer (the worker restarted, or closed the connection when idle past
        connections.max.idle.ms) goes once more on a new one."""
        kept = self._take(host, port)
        if kept is not None:
            try:
                return await self._on(kept, host, port, request)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise
        self.opened += 1
        return await self._on(await self.connects.open_stream(host, port, timeout), host, port, request)

    def close(self) -> None:
        """Close the idle connections (a worker that stops)."""
        for streams in self._idle.values():
            for _, writer in streams:
                writer.close()
        self._idle.clear()

    def _take(self, host: str, port: int) -> Stream | None:
        streams = self._idle.get((host, port), [])
        while streams:
            reader, writer = streams.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return None

    async def _on(self, stream: Stream, host: str, port: int, request: bytes) -> bytes:
        reader, writer = stream
        try:
            writer.write(request)
            await writer.drain()
            size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
            answer = await reader.readexactly(size)
        except BaseException:
            writer.close()
            raise
        idle = self._idle.setdefault((host, port), [])
        if len(idle) < self._idle_kept:
            idle.append(stream)
        else:
            writer.close()
        return answer


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

