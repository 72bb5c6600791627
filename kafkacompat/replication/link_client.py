"""The source side's connection to a destination broker's Kafka port.

One request at a time (a link's partitions are shipped in turn), so the
client is a plain asyncio stream: send a StreamReplicate frame, read the
answer. Errors the destination answers become LinkRefused; a broken
connection is an OSError the link retries. TLS and the SASL login come from
the broker's replication client config (security/client.py).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import struct
from typing import Any

from kafkacompat.protocol.admin_api import AdminMessageError, decode_response
from kafkacompat.protocol.replication_api import encode_request

from ..security.client import ClientSecurity

_I32 = struct.Struct(">i")
_MAX_RESPONSE = 64 * 1024 * 1024


class LinkRefused(Exception):
    """The destination answered with an error."""


def _seen(answer: asyncio.Future[bytes]) -> None:
    """Mark a failed answer's error as read. A call that timed out, or whose write failed, no longer waits for
    its answer; when the connection then breaks, the answer fails with nobody to read it, and asyncio logged
    "ERROR Future exception was never retrieved" with a traceback for each (50 in a 60-minute replication
    campaign), for a loss the link has already logged and recovers from. A call that still waits gets it."""
    if not answer.cancelled():
        answer.exception()


class LinkClient:
    """Requests may be pipelined: the broker answers one connection's requests in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float,
                 source: dict[str, str] | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self._timeout = timeout
        self._source = source  # who sends: every request names it, the destination checks its upstreams
        self._ids = itertools.count(1)
        self._waiting: collections.deque[tuple[int, asyncio.Future[bytes]]] = collections.deque()
        self._reading = asyncio.ensure_future(self._read_answers())

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float = 10.0,
                      source: dict[str, str] | None = None, security: ClientSecurity | None = None) -> LinkClient:
        """Connect, with TLS and a SASL login when `security` (--replication-client-config) asks for them."""
        reader, writer = await (security or ClientSecurity()).open_stream(host, port, timeout)
        return cls(reader, writer, timeout, source)

    @property
    def closed(self) -> bool:
        """The connection is gone: no answer will come on it."""
        return self._reading.done()

    async def call(self, body: dict[str, Any], payload: bytes = b"") -> Any:
        if self._reading.done():
            raise ConnectionError("the connection to the destination is closed")
        if self._source is not None:
            body = {**body, "source": self._source}
        correlation_id = next(self._ids)
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        answer.add_done_callback(_seen)
        self._waiting.append((correlation_id, answer))
        self._writer.write(encode_request(correlation_id, body, payload))
        await self._writer.drain()
        frame = await asyncio.wait_for(asyncio.shield(answer), self._timeout)
        try:
            got, reply = decode_response(frame)
        except AdminMessageError as exc:
            raise ConnectionError(f"unreadable answer: {exc}") from None
        if got != correlation_id:
            raise ConnectionError(f"answer to request {got}, not {correlation_id}")
        if reply.error_code != 0:
            raise LinkRefused(reply.error or f"error code {reply.error_code}")
        return reply.result

    async def _read_answers(self) -> None:
        try:
            while True:
                (size,) = _I32.unpack(await self._reader.readexactly(4))
                if not 0 <= size <= _MAX_RESPONSE:
                    raise ConnectionError(f"answer of impossible size {size}")
                frame = await self._reader.readexactly(size)
                if not self._waiting:
                    raise ConnectionError("an answer nobody asked for")
                _, answer = self._waiting.popleft()
                if not answer.done():
                    answer.set_result(frame)
        except (asyncio.IncompleteReadError, OSError, ConnectionError) as exc:
            error = exc if isinstance(exc, ConnectionError) else ConnectionError(
                "the destination closed the connection")
            while self._waiting:
                _, answer = self._waiting.popleft()
                if not answer.done():
                    answer.set_exception(error)

    async def close(self) -> None:
        """Close at once. Requests still in the buffer are dropped, not flushed: the link resumes from where the
        destination ends, and a destination that stopped reading (paused, or blocked writing answers nobody
        reads any more) would keep a flush, and the broker's shutdown, waiting for ever."""
        self._reading.cancel()
        if self._writer.transport.get_write_buffer_size():
            self._writer.transport.abort()
        else:
            self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        for _, answer in self._waiting:
            answer.cancel()
