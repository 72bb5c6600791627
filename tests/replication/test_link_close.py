"""A stopping link ends at once: its connection closes even when the destination stopped reading, and its
task ends even when a cancellation is lost.

Found by the replication fault campaign (`python -m kafkacompat.chaos --engine replication --minutes 10
--seed 202`): the source broker, sent SIGTERM four seconds after its link reconnected to a restarted replica
and began catching up, logged "shutting down" and was still running 60 s later (its transaction timer still
firing), then was killed. Stopping a link cancels its task and closes its connection, and either could wait
for ever: the cancellation, lost by asyncio.wait_for when an answer arrived with it (Python before 3.12), left
the link shipping; and closing waited to flush buffered requests to a destination that no longer read them.
Nothing needs flushing: the link resumes from where the destination ends. And a broken connection's
answers that nobody waits for any more fail quietly (the link logs the loss itself).
"""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

import pytest
from kafkacompat.protocol.records import Record, build_batch

from kafkacompat import storage
from kafkacompat.replication.engine import MAX_REQUEST_BYTES, PIPELINE_DEPTH, LinkTask
from kafkacompat.replication.link_client import LinkClient
from kafkacompat.replication.links import LinkSpec


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


async def test_stop_ends_a_link_whose_cancellation_was_swallowed() -> None:
    """asyncio.wait_for before Python 3.12 returns the result, and drops the cancellation, when its awaitable
    completes as the task is cancelled; a link catching up gets answers all the time, so stopping it (a
    broker's SIGTERM) must not rely on one cancellation being seen."""
    link = LinkTask(SimpleNamespace(), LinkSpec("/s", "127.0.0.1", 9, "/d"))
    swallowed = asyncio.Event()

    async def session() -> None:  # a session whose wait_for just returned an answer instead of raising
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()
        await asyncio.sleep(3600)  # the session goes on shipping

    link._session = session  # type: ignore[method-assign]
    link.start()
    await asyncio.sleep(0)
    await asyncio.wait_for(link.stop(), 10)
    assert swallowed.is_set() and link._task is None


async def test_answers_nobody_waits_for_any_more_fail_without_an_asyncio_error() -> None:
    """A call that timed out leaves its answer behind; when the connection then breaks, that answer fails
    with nobody to read it. asyncio logged each as "Future exception was never retrieved" (an ERROR with a
    traceback, 50 in a 60-minute replication campaign) although the link logs the loss and reconnects."""
    accepted: list[asyncio.StreamWriter] = []
    reported: list[dict] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = await LinkClient.connect("127.0.0.1", port, timeout=0.2)
        for _ in range(3):
            try:
                await client.call({"op": "ping"})
            except asyncio.TimeoutError:
                pass
        while not accepted:
            await asyncio.sleep(0.01)
        accepted[0].close()  # the destination goes away: the answers still owed fail
        await asyncio.wait_for(client._reading, 10)
        await client.close()
        del client
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
        server.close()
    assert not [context["message"] for context in reported]


async def test_a_shipping_window_broken_with_answers_in_it_leaves_no_asyncio_error() -> None:
    """A partition's shipping keeps several requests in flight (PIPELINE_DEPTH); when the link breaks,
    the oldest answer's failure ends the round and the others, failed too, were left unread: asyncio
    logged each as "Task exception was never retrieved" (twice in a 60-minute replication campaign)."""
    reported: list[dict] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    store = storage.open_store("memory://")
    await store.open()
    try:
        await store.create_topic("/default", "t", 1)
        part = store.partition("/default", "t", 0)
        for _ in range(PIPELINE_DEPTH + 1):  # a request each: every batch is most of a request's bytes
            await part.append(build_batch([Record(None, b"v" * (MAX_REQUEST_BYTES * 3 // 4), [], 1000)]), 1)
        service = SimpleNamespace(store=store, cluster=None, identity=SimpleNamespace(id="source"),
                                  paths=SimpleNamespace(path_at=lambda *_: ()))
        link = LinkTask(service, LinkSpec("/default", "127.0.0.1", 9, "/d"))
        link.dest_uuid = "destination"
        link._topic_ids["t"] = store.get_topic("/default", "t").topic_id
        link.positions["t", 0] = 0
        calls: list[dict] = []

        async def broken(body: dict, payload: bytes = b"") -> dict:
            calls.append(body)
            await asyncio.sleep(0.01)
            raise ConnectionResetError("the destination went away")

        with pytest.raises(ConnectionResetError):
            await link._ship(SimpleNamespace(call=broken), "t", 0)
        for _ in range(3):
            await asyncio.sleep(0.02)
        del link, broken
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
        await store.close()
    assert len(calls) == PIPELINE_DEPTH  # the window was full when the link broke
    assert not [context["message"] for context in reported]
