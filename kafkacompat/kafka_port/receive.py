"""Receiving requests without asyncio.StreamReader's copies, in bounded memory.

StreamReader copies every received byte three times (recv into a new bytes,
extend its buffer, slice out the result) and, once a read has advanced the
buffer's start, each later extend reallocates and copies the whole buffer:
with 1 MiB produce requests that was most of the broker's CPU. Here the
kernel writes into our buffer (BufferedProtocol.recv_into): small frames are
sliced out of a receive buffer, and a large frame gets a buffer of its own
that the kernel fills directly, handed over without a further copy.

Memory follows what a connection needs, not what it announces: the shared
buffer is made at the first bytes, starts at 4 KiB, and is handed back
whole once it has stayed drained for a second, so an idle connection holds
no receive buffer at all (5,000 of them with 256 KiB buffers took 1.3 GB;
with 4 KiB ones kept, 4 KiB of the 20 KiB each idle connection cost). A
busy one keeps its grown buffer
between requests, with room for the next frame's size prefix: a 16 KiB
produce request then arrives in one receive, where a buffer shrunk after
every frame took two receives, two loop turns and a copy into a new
buffer.

A large frame first receives its opening MiB into a buffer of that size;
only once those bytes have arrived does it get its full-size buffer,
reserved from a broker-wide `FrameBudget` (Kafka's
queued.max.request.bytes): a connection that announces 100 MiB and stalls
holds at most a MiB, and one that would overrun the budget stops being read
until other frames are handed over.

`FrameStream.readexactly` keeps StreamReader's contract, so the connection
code reads frames as it did; `serve_frames` is the counterpart of
asyncio.start_server.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from asyncio.streams import FlowControlMixin
from collections.abc import Callable, Coroutine
from typing import Any, cast

INITIAL_BUFFER = 4 * 1024  # the receive buffer's first size, made when bytes first arrive
GIVE_BACK_AFTER_S = 1.0  # a buffer drained and unused this long is handed back
RECEIVE_BUFFER = 256 * 1024  # the shared buffer grows no further; reading pauses when it is full
DIRECT_FROM = 64 * 1024  # frames at least this large are received into their own buffer
STAGE_BYTES = 1 << 20  # a large frame's first bytes, received before its full buffer exists
PAUSE_ABOVE = 1 << 20  # unread bytes that pause reading from the socket (StreamReader's limit)


class FrameBudget:
    """Bytes of large frames being received, shared by every connection of a broker.

    `reserve` waits while the bytes held would pass the limit (None: no
    limit); a lone frame larger than the whole budget still goes through, so
    the budget can only delay, never wedge, a frame the size limit allows.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def reserve(self, n: int) -> None:
        while self.limit is not None and self.held > 0 and self.held + n > self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.held += n

    def release(self, n: int) -> None:
        self.held -= n
        while self._waiters:  # each waiter re-checks; wake them all, in arrival order
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


UNLIMITED = FrameBudget(None)


class FrameStream:
    """The reading half: received bytes waiting for `readexactly`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, budget: FrameBudget = UNLIMITED) -> None:
        self._loop = loop
        self._budget = budget
        self._buf = bytearray()  # made at the first bytes (get_buffer), handed back when drained and quiet
        self._start = 0  # first unread byte of _buf
        self._end = 0  # one past the last received byte of _buf
        self._direct: bytearray | None = None  # a large frame being received in place
        self._direct_filled = 0
        self._into_direct = False  # where the last get_buffer pointed
        self._waiter: asyncio.Future[None] | None = None
        self._give_back: asyncio.TimerHandle | None = None
        self._eof = False
        self._exception: BaseException | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._paused = False
        self._held_back = False  # paused while waiting for the frame budget
        self.last_received = loop.time()  # when bytes last arrived (for connections.max.idle.ms)

    # fed by the protocol ---------------------------------------------------------

    def get_buffer(self) -> memoryview:
        direct = self._direct
        self._into_direct = direct is not None and self._direct_filled < len(direct)
        if direct is not None and self._into_direct:
            return memoryview(direct)[self._direct_filled :]
        # (bytes past a completed large frame wait in _buf until it is taken)
        if self._end == len(self._buf):
            self._move_unread(2 * len(self._buf) if self._start == 0 else len(self._buf))
        return memoryview(self._buf)[self._end :]

    def _move_unread(self, size: int) -> None:
        """Unread bytes into a fresh buffer of at least `size` bytes.

        A new buffer rather than moving bytes in place: a memoryview handed
        out earlier may still be alive, which forbids resizing.
        """
        unread = self._end - self._start
        fresh = bytearray(max(size, unread, INITIAL_BUFFER))
        fresh[:unread] = memoryview(self._buf)[self._start : self._end]
        self._buf, self._start, self._end = fresh, 0, unread

    def buffer_updated(self, nbytes: int) -> None:
        self.last_received = self._loop.time()
        if self._into_direct:
            self._direct_filled += nbytes
        else:
            self._end += nbytes
            unread = self._end - self._start
            if unread > PAUSE_ABOVE or (self._end == len(self._buf) >= RECEIVE_BUFFER):
                self._pause()
        self._wake()

    def feed_eof(self) -> None:
        self._eof = True
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        self._exception = exc
        self._wake()

    def peer_closed(self) -> bool:
        """Whether the client closed (or lost) the connection: the bytes still buffered are read, but no
        answer reaches it any more. A close that arrived behind the frames just read is still in the
        kernel (the loop reads it at its next turn). Over TCP the connection's state tells it whatever
        is unread before it (a peek saw the next request's bytes, and a paused broker stored every one
        of several requests its client had given up but the last); elsewhere a peek sees it when
        nothing else is waiting."""
        if self._eof or self._exception is not None:
            return True
        sock = self._transport.get_extra_info("socket") if self._transport is not None else None
        if sock is None or sock.type != socket.SOCK_STREAM:
            return False
        state = _tcp_state(sock)
        if state is not None:
            return state != TCP_ESTABLISHED
        if self._paused:
            return False
        probe = socket.socket(fileno=sock.fileno())
        try:
            return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False  # nothing waiting: still open
        except OSError:
            return True  # reset
        finally:
            probe.detach()

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
        if self._paused and not self._held_back and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()  # type: ignore[attr-defined]

    async def _wait(self, n: int) -> None:
        if self._exception is not None:
            raise self._exception
        if self._eof:
            raise asyncio.IncompleteReadError(b"", n)  # partial bytes are of no use to anyone
        if self._give_back is None and self._start == self._end and self._buf:
            self._give_back = self._loop.call_later(GIVE_BACK_AFTER_S, self._give_back_buffer)
        self._resume()
        self._waiter = self._loop.create_future()
        await self._waiter

    def _give_back_buffer(self) -> None:
        """Handed back once drained and quiet for GIVE_BACK_AFTER_S; checked again later if not."""
        self._give_back = None
        if not self._buf or self._eof or self._exception is not None:
            return
        quiet = self._loop.time() - self.last_received >= GIVE_BACK_AFTER_S
        if quiet and self._start == self._end and self._direct is None:
            self._buf, self._start, self._end = bytearray(), 0, 0
        else:
            self._give_back = self._loop.call_later(GIVE_BACK_AFTER_S, self._give_back_buffer)

    # read by the connection ------------------------------------------------------

    async def readexactly(self, n: int) -> bytes | bytearray:
        """Exactly n bytes (a bytearray for large frames); IncompleteReadError at EOF."""
        unread = self._end - self._start
        if n >= DIRECT_FROM and unread < n:
            return await self._read_direct(n)
        while self._end - self._start < n:
            if len(self._buf) - self._start < n:  # room for the frame and the next one's size prefix
                self._move_unread(1 << (n + 4).bit_length())
            await self._wait(n)
        data = bytes(memoryview(self._buf)[self._start : self._start + n])
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        if self._end - self._start <= PAUSE_ABOVE and self._end < len(self._buf):
            self._resume()
        return data

    async def _read_direct(self, n: int) -> bytearray:
        """A large frame: its opening MiB first, then (budget allowing) the whole of it."""
        staged = min(n, STAGE_BYTES)
        reserved = 0
        try:
            await self._hold_back_until_reserved(staged)
            reserved = staged
            frame = self._take_into(bytearray(staged))
            await self._fill_direct(frame, n)
            if n > staged:
                await self._hold_back_until_reserved(n - staged)
                reserved = n
                whole = bytearray(n)
                whole[:staged] = frame
                del frame
                frame = self._take_into(whole, staged)
                await self._fill_direct(frame, n)
            return frame
        finally:
            self._direct = None
            if reserved:
                self._budget.release(reserved)

    async def _hold_back_until_reserved(self, n: int) -> None:
        """Reserve n bytes of the frame budget, not reading this socket meanwhile."""
        budget = self._budget
        if budget.limit is None or budget.held == 0 or budget.held + n <= budget.limit:
            await budget.reserve(n)
            return
        self._pause()
        self._held_back = True
        try:
            await budget.reserve(n)
        finally:
            self._held_back = False

    def _take_into(self, frame: bytearray, filled: int = 0) -> bytearray:
        """Start receiving into `frame`, first moving in unread bytes of the shared buffer."""
        unread = min(self._end - self._start, len(frame) - filled)
        frame[filled : filled + unread] = memoryview(self._buf)[self._start : self._start + unread]
        self._start += unread
        if self._start == self._end:
            self._start = self._end = 0
        self._direct, self._direct_filled = frame, filled + unread
        return frame

    async def _fill_direct(self, frame: bytearray, n: int) -> None:
        while self._direct_filled < len(frame):
            await self._wait(n)


class FrameProtocol(FlowControlMixin, asyncio.BufferedProtocol):
    """Feeds a FrameStream and backs the StreamWriter (drain, close waiter)."""

    def __init__(
        self,
        on_connect: Callable[[FrameStream, asyncio.StreamWriter], Coroutine[Any, Any, None]],
        budget: FrameBudget = UNLIMITED,
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop)
        self._event_loop = loop
        self._on_connect = on_connect
        self._stream = FrameStream(loop, budget)
        self._closed = loop.create_future()
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._stream.set_transport(transport)
        # No reader for the writer: StreamWriter accepts only a StreamReader there.
        writer = asyncio.StreamWriter(cast(asyncio.WriteTransport, transport), self, None, self._event_loop)
        self._task = self._event_loop.create_task(self._on_connect(self._stream, writer))

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
    on_connect: Callable[[FrameStream, asyncio.StreamWriter], Coroutine[Any, Any, None]],
    host: str,
    port: int,
    budget: FrameBudget = UNLIMITED,
    wrap: Callable[[asyncio.BaseProtocol], asyncio.BaseProtocol] | None = None,
    **kwargs: Any,
) -> asyncio.base_events.Server:
    """Like asyncio.start_server, with a FrameStream as each connection's reader.

    `wrap` puts a layer (TLS) between the socket and each connection's FrameProtocol. With `sock` (a
    listening socket handed down) in `kwargs`, `host` and `port` are not used.
    """
    loop = asyncio.get_running_loop()
    if kwargs.get("sock") is not None:
        host, port = None, None  # type: ignore[assignment]
    if wrap is None:
        return await loop.create_server(lambda: FrameProtocol(on_connect, budget), host, port, **kwargs)
    return await loop.create_server(lambda: wrap(FrameProtocol(on_connect, budget)), host, port, **kwargs)


TCP_ESTABLISHED = 1  # tcp_info.tcpi_state (Linux): a peer's FIN makes it CLOSE_WAIT, a reset CLOSE


def _tcp_state(sock: socket.socket) -> int | None:
    """The kernel's state of a TCP connection (Linux's TCP_INFO), None where it cannot be read."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not hasattr(socket, "TCP_INFO"):
        return None
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except OSError:
        return None
