"""FrameStream hands back exactly the bytes received, however the socket splits them."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from kafkacompat.kafka_port.receive import DIRECT_FROM, PAUSE_ABOVE, RECEIVE_BUFFER, FrameStream


class _Transport:
    def __init__(self) -> None:
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def _feed(stream: FrameStream, data: bytes, piece: int) -> None:
    """What the event loop does: recv_into get_buffer(), then buffer_updated()."""
    pos = 0
    while pos < len(data):
        buf = stream.get_buffer()
        n = min(len(buf), piece, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        stream.buffer_updated(n)
        pos += n


def _frames(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    bodies = [os.urandom(size) for size in sizes]
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies), bodies


async def _read_all(stream: FrameStream, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await stream.readexactly(4))
        out.append(bytes(await stream.readexactly(size)))
    return out


@pytest.mark.parametrize("piece", [997, 4096, 65536, 1 << 22])
async def test_frames_come_back_whole(piece: int) -> None:
    sizes = [0, 1, 100, DIRECT_FROM - 1, DIRECT_FROM, RECEIVE_BUFFER + 3, 3 * RECEIVE_BUFFER, 5, 2 << 20]
    data, bodies = _frames(sizes)
    stream = FrameStream(asyncio.get_running_loop())
    stream.set_transport(_Transport())  # type: ignore[arg-type]
    reader = asyncio.create_task(_read_all(stream, len(bodies)))
    pos = 0
    while pos < len(data):  # interleave arrival and reading
        step = min(len(data) - pos, 300_000)
        _feed(stream, data[pos : pos + step], piece)
        pos += step
        await asyncio.sleep(0)
    stream.feed_eof()
    assert await reader == bodies


async def test_everything_already_received() -> None:
    data, bodies = _frames([10, DIRECT_FROM * 2, 10])
    stream = FrameStream(asyncio.get_running_loop())
    _feed(stream, data, 1 << 30)
    assert await _read_all(stream, 3) == bodies


async def test_eof_mid_frame_is_an_incomplete_read() -> None:
    stream = FrameStream(asyncio.get_running_loop())
    _feed(stream, struct.pack(">i", 100) + b"x" * 10, 1000)
    stream.feed_eof()
    await stream.readexactly(4)
    with pytest.raises(asyncio.IncompleteReadError):
        await stream.readexactly(100)


async def test_reading_pauses_while_unread_bytes_pile_up() -> None:
    stream = FrameStream(asyncio.get_running_loop())
    transport = _Transport()
    stream.set_transport(transport)  # type: ignore[arg-type]
    data, bodies = _frames([1000] * (PAUSE_ABOVE // 1000 + 10))
    _feed(stream, data, 65536)
    assert transport.paused
    assert await _read_all(stream, len(bodies)) == bodies
    assert not transport.paused


async def test_large_frames_wait_for_the_shared_budget() -> None:
    from kafkacompat.kafka_port.receive import STAGE_BYTES, FrameBudget

    budget = FrameBudget(3 * STAGE_BYTES)
    loop = asyncio.get_running_loop()
    first, second = FrameStream(loop, budget), FrameStream(loop, budget)
    transports = [_Transport(), _Transport()]
    first.set_transport(transports[0])  # type: ignore[arg-type]
    second.set_transport(transports[1])  # type: ignore[arg-type]
    size = 2 * STAGE_BYTES
    body_a, body_b = os.urandom(size), os.urandom(size)
    reading_a = asyncio.create_task(first.readexactly(size))
    reading_b = asyncio.create_task(second.readexactly(size))
    _feed(first, body_a[:STAGE_BYTES], 65536)
    await asyncio.sleep(0)
    _feed(second, body_b[:STAGE_BYTES], 65536)
    for _ in range(5):
        await asyncio.sleep(0)
    # the first holds its whole frame (2 MiB) and the second its staged MiB: 3 MiB
    assert budget.held == size + STAGE_BYTES
    assert transports[1].paused  # the second waits for the budget without reading
    _feed(first, body_a[STAGE_BYTES:], 65536)
    assert await reading_a == body_a
    for _ in range(5):
        await asyncio.sleep(0)
    assert not transports[1].paused
    _feed(second, body_b[STAGE_BYTES:], 65536)
    assert await reading_b == body_b
    assert budget.held == 0


async def test_a_drained_stream_gives_its_buffer_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkacompat.kafka_port import receive

    monkeypatch.setattr(receive, "GIVE_BACK_AFTER_S", 0.05)
    stream = FrameStream(asyncio.get_running_loop())
    stream.set_transport(_Transport())  # type: ignore[arg-type]
    data, bodies = _frames([40_000, 50_000])
    _feed(stream, data, 1 << 20)
    assert await _read_all(stream, 2) == bodies
    waiting = asyncio.create_task(stream.readexactly(4))
    await asyncio.sleep(0)
    assert len(stream._buf) > receive.INITIAL_BUFFER  # kept while the connection may go on sending
    async with asyncio.timeout(5):
        while len(stream._buf) != 0:  # then given back whole once quiet
            await asyncio.sleep(0.01)
    _feed(stream, b"abcd", 10)
    assert await waiting == b"abcd"


async def test_a_busy_stream_takes_each_frame_in_one_receive() -> None:
    """A connection sending 16 KiB requests: after the first, each arrives in the buffer it left."""
    stream = FrameStream(asyncio.get_running_loop())
    stream.set_transport(_Transport())  # type: ignore[arg-type]
    data, bodies = _frames([16_500] * 4)
    frame = len(data) // 4
    _feed(stream, data[:frame], 1 << 20)
    assert await _read_all(stream, 1) == bodies[:1]
    for i in range(1, 4):
        reading = asyncio.create_task(_read_all(stream, 1))
        await asyncio.sleep(0)
        buffer = stream.get_buffer()
        assert len(buffer) >= frame  # room for the whole next frame, size prefix included
        buffer[:frame] = data[i * frame : (i + 1) * frame]
        stream.buffer_updated(frame)
        assert await reading == bodies[i : i + 1]