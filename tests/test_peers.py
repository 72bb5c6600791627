"""The connections a broker keeps to the other brokers (kafkacompat/cluster/peers.py `Peers`).

A local frame server stands for the other broker: it answers each request
frame with its own bytes and counts the connections it accepted and saw
end, so each test sees what the broker at the other end would: how many
connections it was asked on, and which were left open.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from kafkacompat.cluster.peers import Peers

SIZE = struct.Struct(">i")


def frame(body: bytes) -> bytes:
    return SIZE.pack(len(body)) + body


class FrameServer:
    """Answers `b"answer:" + request`; a request starting `slow` after `delay` s; with `answer_once`, closes
    a connection at the second request on it instead of answering."""

    def __init__(self, answer_once: bool = False, delay: float = 0.0) -> None:
        self.answer_once = answer_once
        self.delay = delay
        self.accepted = 0
        self.ended = 0
        self.server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> "FrameServer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def open_stream(self, host: str, port: int, timeout: float
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        answered = 0
        try:
            while True:
                size = SIZE.unpack(await reader.readexactly(SIZE.size))[0]
                body = await reader.readexactly(size)
                if self.answer_once and answered:
                    return
                if body.startswith(b"slow"):
                    await asyncio.sleep(self.delay)
                writer.write(frame(b"answer:" + body))
                await writer.drain()
                answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended += 1
            writer.close()


async def until(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time"
        await asyncio.sleep(0.01)


async def test_requests_one_after_another_go_on_one_connection() -> None:
    async with FrameServer() as server:
        peers = Peers(server)
        answers = [await peers.exchange("127.0.0.1", server.port, frame(b"r%d" % i), 5) for i in range(5)]
        assert answers == [b"answer:r%d" % i for i in range(5)]
        assert (server.accepted, peers.opened) == (1, 1)
        peers.close()
        await until(lambda: server.ended == 1)


async def test_a_request_on_a_connection_the_worker_ended_is_answered_on_a_new_one() -> None:
    # a worker that restarted, or closed a connection idle past connections.max.idle.ms: the kept
    # connection ends before any answer, and the request goes again on a new connection
    async with FrameServer(answer_once=True) as server:
        peers = Peers(server)
        answers = [await peers.exchange("127.0.0.1", server.port, frame(b"r%d" % i), 5) for i in range(3)]
        assert answers == [b"answer:r0", b"answer:r1", b"answer:r2"]
        assert server.accepted == 3
        peers.close()


async def test_a_request_that_timed_out_closes_its_connection_and_the_next_gets_its_own_answer() -> None:
    async with FrameServer(delay=0.5) as server:
        peers = Peers(server)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(peers.exchange("127.0.0.1", server.port, frame(b"slow"), 5), 0.1)
        await until(lambda: server.ended == 1)  # closed, so its late answer cannot be taken for another's
        assert await peers.exchange("127.0.0.1", server.port, frame(b"fast"), 5) == b"answer:fast"
        assert server.accepted == 2
        peers.close()


async def test_overlapping_requests_each_get_their_answer_and_only_idle_kept_stay_open() -> None:
    async with FrameServer(delay=0.05) as server:
        peers = Peers(server, idle_kept=2)
        answers = await asyncio.gather(*(peers.exchange("127.0.0.1", server.port, frame(b"slow%d" % i), 5)
                                         for i in range(8)))
        assert answers == [b"answer:slow%d" % i for i in range(8)]
        assert server.accepted == 8
        await until(lambda: server.ended == 6)
        assert await peers.exchange("127.0.0.1", server.port, frame(b"again"), 5) == b"answer:again"
        assert server.accepted == 8
        peers.close()
        await until(lambda: server.ended == 8)
