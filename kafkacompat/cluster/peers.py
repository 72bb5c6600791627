"""The connections a broker keeps to the other brokers of its cluster, for the requests it sends them.

Kafka's brokers keep their connections to each other open. Ours send each
other requests on paths a client waits on: the workers of `serve --workers
N` (WorkerState, relayed requests, a transaction's verification and markers,
forwarded catalog changes: workers/), and every broker's REST proxy, which
asks a partition's leader or a group's coordinator for each poll of a REST
consumer (http/kafka_calls.py). Opened per request, each cost both brokers
an accept and a connection's set-up (over TCP with a login, a SASL exchange
too).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Protocol

_SIZE = struct.Struct(">i")
IDLE_KEPT = 16  # idle connections kept to each other broker (more are opened while requests overlap)


class Connects(Protocol):
    """How a broker connects to another: ClientSecurity (TCP, with TLS and a login when configured) or the
    workers' own channel (workers/channel.py)."""

    async def open_stream(self, host: str, port: int, timeout: float
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Peers:
    """The connections a broker keeps to the others, opened with `connects` when none is idle.

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
        """Send one whole request frame (size prefix included) to the broker at host:port; its answer's
        frame, without the size prefix. A request that met the end of a kept connection before any of
        its answer (the broker restarted, or closed the connection when idle past
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
        """Close the idle connections (a broker that stops)."""
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
