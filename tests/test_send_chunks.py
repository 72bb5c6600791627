"""Large answers sent as gathered buffers arrive whole and in order, on plain TCP and through TLS.

An answer of more buffers than one writev takes (a Metadata for a million
topics) is written in pieces, the socket drained between them, so the
event loop serves others meanwhile and the transport never holds it whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from confluent_kafka import Consumer, Producer

from kafkacompat.kafka_port.send import IOV_MAX, NATIVE_GATHER, in_pieces, plain_socket_fd, send_chunks, send_in_pieces
from kafkacompat.testing import Broker
from kafkacompat.testing.certificates import CertificateAuthority

MIB = 1 << 20


def _answers() -> list[list[bytes]]:
    """Answers shaped like Fetch responses: a small envelope, records of a megabyte or more, a tail."""
    return [[os.urandom(40), os.urandom(3 * MIB), b"\x00", os.urandom(MIB + 7), os.urandom(9)] for _ in range(3)]


@contextlib.asynccontextmanager
async def _served(handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], tls: bool,
                  tmp_path) -> AsyncIterator[asyncio.StreamReader]:
    """A local server that answers with `handle`, and the reading end of one client connected to it."""
    server_ctx, client_ctx = _contexts(tmp_path) if tls else (None, None)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx,
                                                       server_hostname="localhost" if tls else None)
        try:
            yield reader
        finally:
            writer.close()
    finally:
        server.close()
        await server.wait_closed()


async def _serve_and_read(tls: bool, tmp_path) -> tuple[bytes, bytes, int | None]:
    """Send every answer back to back while the client reads nothing, then read it all."""
    answers = _answers()
    expected = b"".join(b"".join(answer) for answer in answers)
    sent = asyncio.get_running_loop().create_future()
    fds: list[int | None] = []

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        fd = plain_socket_fd(writer)
        fds.append(fd)
        for answer in answers:  # the socket fills up on the first: the rest queue behind it
            send_chunks(writer, answer, fd)
        sent.set_result(None)
        await writer.drain()
        writer.close()

    async with _served(handle, tls, tmp_path) as reader:
        await asyncio.wait_for(sent, 30)
        received = await asyncio.wait_for(reader.read(), 60)
    return received, expected, fds[0]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_gathered_answers_arrive_whole_and_in_order(tls: bool, tmp_path) -> None:
    received, expected, fd = await _serve_and_read(tls, tmp_path)
    assert len(received) == len(expected) and received == expected
    # TLS bytes never bypass the TLS layer; plain sockets are written directly where Python joins buffers
    assert (fd is not None) == (not tls and not NATIVE_GATHER)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_an_answer_of_many_buffers_goes_in_pieces_while_the_loop_serves_others(tls: bool, tmp_path) -> None:
    """20 MiB in 10 KiB buffers (as a listing's topic entries) to a client that reads nothing at first:
    the server's transport holds a piece at a time, never the answer, and other tasks run meanwhile;
    once the client reads, every byte arrives in order."""
    chunks = [os.urandom(10 * 1024) for _ in range(2048)]
    assert in_pieces(chunks) and len(chunks) > IOV_MAX
    most_held: list[int] = []
    done = asyncio.get_running_loop().create_future()

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def watch() -> None:  # another connection's work: it must get turns while the answer goes out
            while not done.done():
                most_held.append(writer.transport.get_write_buffer_size())
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(watch())
        await send_in_pieces(writer, chunks, plain_socket_fd(writer))
        await writer.drain()
        done.set_result(None)
        await watcher
        writer.close()

    async with _served(handle, tls, tmp_path) as reader:
        while len(most_held) < 20:  # the client reads nothing yet: the server is stuck mid-answer
            await asyncio.sleep(0.01)
        assert not done.done()
        received = await asyncio.wait_for(reader.read(), 60)
    assert received == b"".join(chunks)
    assert max(most_held) <= 64 * 1024 + IOV_MAX * 10 * 1024, max(most_held)  # a piece over the high-water mark


def _contexts(tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = CertificateAuthority(str(tmp_path))
    issued = ca.issue("server", server=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(issued.certificate, issued.key)
    return server_ctx, ssl.create_default_context(cafile=ca.location)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_consumer_reads_megabyte_fetch_answers_intact(tls: bool) -> None:
    """librdkafka reads back 24 values of 300 KB (answers of a megabyte, records sent without a copy)."""
    values = [os.urandom(300_000) for _ in range(24)]
    topic = f"send-{uuid.uuid4().hex[:6]}"
    with Broker(tls=tls) as broker:
        config = {**broker.client_config(), "message.max.bytes": 2_000_000}
        producer = Producer({**config, "linger.ms": 50, "batch.size": 1_000_000})
        for value in values:
            producer.produce(topic, value)
        assert producer.flush(30) == 0
        consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                             "fetch.max.bytes": 3_000_000, "max.partition.fetch.bytes": 1_048_576})
        consumer.subscribe([topic])
        got: list[bytes] = []
        try:
            for _ in range(60):
                for msg in consumer.consume(num_messages=24, timeout=1):
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
                if len(got) >= len(values):
                    break
        finally:
            consumer.close()
    assert got == values
