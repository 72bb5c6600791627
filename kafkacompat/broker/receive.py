"""Receiving requests without asyncio.StreamReader's copies.

StreamReader copies every received byte three times (recv into a new bytes,
extend its buffer, slice out the result) and, once a read has advanced the
buffer's start, each later extend reallocates and copies the whole buffer:
with 1 MiB produce requests that was most of the broker's CPU. Here the
kernel writes into our buffer (BufferedProtocol.recv_into): small frames are
sliced out of a reused receive buffer, and a large frame gets a buffer of its
own that the kernel fills directly, handed over without a further copy.

`FrameStream.readexactly` keeps StreamReader's contract, so the connection
code reads frames as it did; `serve_frames` is the counterpart of
asyncio.start_server.
"""

from __future__ import annotations

import asyncio
from asyncio.streams import FlowControlMixin
from collections.abc import Awaitable, Callable
from typing import Any

RECEIVE_BUFFER = 256 * 1024  # reused for small frames
DIRECT_FROM = 64 * 1024  # frames at least this large are received into their own buffer
PAUSE_ABOVE = 1 << 20  # unread bytes that pause reading from the socket (StreamReader's limit)


class FrameStream:
    """The reading half: received bytes waiting for `readexactly`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buf = bytearray(RECEIVE_BUFFER)
        self._start = 0  # first unread byte of _buf
        self._end = 0  # one past the last received byte of _buf
        self._direct: bytearray | None = None  # a large frame being received in place
        self._direct_filled = 0
        self._into_direct = False  # where the last get_buffer pointed
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._exception: BaseException | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._paused = False

    # fed by the protocol ---------------------------------------------------------

    def get_buffer(self) -> memoryview:
        direct = self._direct
        self._into_direct = direct is not None and self._direct_filled < len(direct)
        if self._into_direct:
            return memoryview(direct)[self._direct_filled :]  # type: ignore[index]
        # (bytes past a completed large frame wait in _buf until it is taken)
        if self._end == len(self._buf):
            unread = self._end - self._start
            # A new buffer rather than moving bytes in place: a memoryview
            # handed out earlier may still be alive, which forbids resizing.
            fresh = bytearray(max(RECEIVE_BUFFER, 2 * unread))
            fresh[:unread] = memoryview(self._buf)[self._start : self._end]
            self._buf, self._start, self._end = fresh, 0, unread
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._into_direct:
            self._direct_filled += nbytes
        else:
            self._end += nbytes
            if self._end - self._start > PAUSE_ABOVE:
                self._pause()
        self._wake()

    def feed_eof(self) -> None:
        self._eof = True
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        self._exception = exc
        self._wake()

    def set_transport(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause(self) -> None:
        if not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()  # type: ignore[attr-defined]

    def _resume(self) -> None:
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()  # type: ignore[attr-defined]

    async def _wait(self, n: int) -> None:
        if self._exception is not None:
            raise self._exception
        if self._eof:
            raise asyncio.IncompleteReadError(b"", n)  # partial bytes are of no use to anyone
        self._resume()
        self._waiter = self._loop.create_future()
        await self._waiter

    # read by the connection ------------------------------------------------------

    async def readexactly(self, n: int) -> bytes | bytearray:
        """Exactly n bytes (a bytearray for large frames); IncompleteReadError at EOF."""
        unread = self._end - self._start
        if n >= DIRECT_FROM and unread < n:
            return await self._read_direct(n, unread)
        while self._end - self._start < n:
            await self._wait(n)
        data = bytes(memoryview(self._buf)[self._start : self._start + n])
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        if self._end - self._start <= PAUSE_ABOVE:
            self._resume()
        return data

    async def _read_direct(self, n: int, unread: int) -> bytearray:
        frame = bytearray(n)
        frame[:unread] = memoryview(self._buf)[self._start : self._end]
        self._start = self._end = 0
        self._direct, self._direct_filled = frame, unread
        try:
            while self._direct_filled < n:
                await self._wait(n)
        finally:
            self._direct = None
        return frame


class FrameProtocol(FlowControlMixin, asyncio.BufferedProtocol):
    """Feeds a FrameStream and backs the StreamWriter (drain, close waiter)."""

    def __init__(self, on_connect: Callable[[FrameStream, asyncio.StreamWriter], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop)
        self._on_connect = on_connect
        self._stream = FrameStream(loop)
        self._closed = loop.create_future()
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._stream.set_transport(transport)
        # No reader for the writer: StreamWriter accepts only a StreamReader there.
        writer = asyncio.StreamWriter(transport, self, None, self._loop)
        self._task = self._loop.create_task(self._on_connect(self._stream, writer))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._stream.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._stream.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        self._stream.feed_eof()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._stream.feed_eof()
        else:
            self._stream.set_exception(exc)
        if not self._closed.done():
            self._closed.set_result(None)
        super().connection_lost(exc)

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed


async def serve_frames(
    on_connect: Callable[[FrameStream, asyncio.StreamWriter], Awaitable[None]],
    host: str,
    port: int,
    **kwargs: Any,
) -> asyncio.base_events.Server:
    """Like asyncio.start_server, with a FrameStream as each connection's reader."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: FrameProtocol(on_connect), host, port, **kwargs)
