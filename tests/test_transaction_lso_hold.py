"""The last stable offset never passes an open transaction's batch, not even while the batch is being written.

The disk store makes a batch readable (the high watermark moves) a few
event-loop turns before the produce handler learns its offset; a
read_committed Fetch served in between used to get the first batch of an
open transaction (the fault campaign's `aborted-read`, seed 31 on the
replication engine). The first batch of a partition always takes that
path (the store starts a partitionlet for it). A watcher on the broker's
own event loop reads the offset a read_committed Fetch is answered up to
at every turn of the loop while the transaction is open; the requests go
over the wire from a thread, as a client's would.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.test_transactions_protocol import add_partitions, end_txn, fetch, init, produce_txn, txn_batch
from tests.wire import Wire


async def test_a_read_committed_fetch_never_sees_an_open_transactions_batch_being_written() -> None:
    async with Broker("tmp") as broker:
        await broker.acreate_topic("held")
        cluster = broker.server.cluster
        assert cluster is not None
        txns = await cluster.transactions.partitions.get(cluster.default_stream, "held", 0)
        exposed: list[tuple[int, int]] = []  # (high watermark, LSO) seen while the transaction is open
        watching = True

        async def watch() -> None:
            while watching:
                if txns.last_stable_offset > 0:
                    exposed.append((txns.partition.high_watermark, txns.last_stable_offset))
                await asyncio.sleep(0)

        def open_transaction() -> tuple[int, int]:
            with Wire(broker.bootstrap_servers) as wire:
                started = init(wire, "held-txn")
                pid, epoch = started.producer_id, started.producer_epoch
                assert add_partitions(wire, "held-txn", pid, epoch, "held") == [ErrorCode.none]
                assert produce_txn(wire, "held-txn", "held", txn_batch(pid, epoch, 0, b"open")) == ErrorCode.none
                answer = fetch(wire, "held", 1)
                assert (answer.high_watermark, answer.last_stable_offset) == (1, 0)
                return pid, epoch

        watcher = asyncio.create_task(watch())
        try:
            pid, epoch = await asyncio.wait_for(asyncio.to_thread(open_transaction), 30)
        finally:
            watching = False
            await watcher
        assert exposed == []  # read_committed readers were held below the open transaction throughout

        def commit() -> int:
            with Wire(broker.bootstrap_servers) as wire:
                assert end_txn(wire, "held-txn", pid, epoch, True) == ErrorCode.none
                return fetch(wire, "held", 1).last_stable_offset

        assert await asyncio.wait_for(asyncio.to_thread(commit), 30) == 2  # the batch and its marker
