"""A link's connection closes at once even when its destination has stopped reading.

Found by the replication fault campaign (`python -m kafkacompat.chaos --engine replication --minutes 10
--seed 202`): the source broker, sent SIGTERM while its link was catching up, logged "shutting down" and was
still running 60 s later. Stopping a link cancels it and closes its connection; closing waited for the
pipelined requests still in the socket's buffer to be flushed to a destination that no longer read them
(paused, or itself blocked writing answers the closing link no longer reads), so the broker never stopped.
Nothing needs flushing: the link resumes from where the destination ends.
"""

from __future__ import annotations

import asyncio

from kafkacompat.replication.link_client import LinkClient


async def test_close_does_not_wait_for_a_destination_that_does_not_read() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # holds the connection open and reads nothing

    server = await asyncio.start_server(never_read, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = await LinkClient.connect("127.0.0.1", port, timeout=60)
        shipping = asyncio.create_task(client.call({"op": "append"}, b"x" * (64 << 20)))
        while client._writer.transport.get_write_buffer_size() == 0:  # the kernel's buffers are full
            await asyncio.sleep(0.01)
        shipping.cancel()  # the link is stopped: its task cancelled, then its connection closed
        await asyncio.gather(shipping, return_exceptions=True)
        await asyncio.wait_for(client.close(), 10)
        assert client._writer.transport.is_closing()
    finally:
        for writer in accepted:
            writer.close()
        server.close()
