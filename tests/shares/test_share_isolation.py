"""share.isolation.level=read_committed at the wire: what ShareFetch acquires around transactions.

The Java 4.1 KafkaShareConsumer's view, compared with Kafka's, is in
compat_tests/test_share_groups_java.py; this shows the acquired offset runs
and the share-partition state behind it, and that a ShareFetch waiting on an
open transaction is answered when it commits.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat.shares.manager import ShareService
from kafkacompat.shares.share_partition import RecordState
from kafkacompat.testing import Broker
from tests.shares.test_share_sessions import _acquired, _fetch
from tests.test_transactions_protocol import add_partitions, end_txn, init, produce_txn, txn_batch
from tests.wire import Wire


def _transaction(wire: Wire, txn_id: str, topic: str, *values: bytes) -> tuple[int, int]:
    """A transaction of one batch of the values, left open: (producer id, epoch)."""
    started = init(wire, txn_id)
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(wire, txn_id, pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, txn_id, topic, txn_batch(pid, epoch, 0, *values)) == ErrorCode.none
    return pid, epoch


def _counted(shares: ShareService) -> list[None]:
    """A list that grows by one at every acquisition attempt of the broker's share service."""
    tries: list[None] = []
    acquire = shares.acquire

    async def counting(*args: Any, **kwargs: Any) -> Any:
        tries.append(None)
        return await acquire(*args, **kwargs)

    shares.acquire = counting  # type: ignore[method-assign]
    return tries


def _wait_for(condition: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_read_committed_archives_aborted_records_and_waits_for_open_transactions() -> None:
    with Broker() as broker:
        broker.create_topic("t")
        configs = {"group-config:g:share.auto.offset.reset": "earliest",
                   "group-config:g:share.isolation.level": "read_committed"}
        broker.call(broker.server.cluster.store.set_settings(configs))
        topic_id = broker.server.cluster.topic_for("t")[0].topic_id
        with Wire(broker.bootstrap_servers) as wire, Wire(broker.bootstrap_servers) as waiting:
            aborted = _transaction(wire, "aborts", "t", b"a0", b"a1")  # offsets 0-1
            assert end_txn(wire, "aborts", *aborted, False) == ErrorCode.none  # abort marker at 2
            broker.produce("t", b"p0", partition=0)  # 3
            still_open = _transaction(wire, "open", "t", b"o0")  # 4
            broker.produce("t", b"p1", partition=0)  # 5: behind the open transaction
            # the marker at 2 is acquired with p0 (the client acknowledges it as a gap), a0 and a1 never
            assert _acquired(_fetch(wire, topic_id, 0)) == [(2, 3, 1)]
            part = broker.server.cluster.shares.partitions[("g", topic_id, 0)]
            assert part.start_offset == 2 and part.end_offset == 4  # archived, passed; nothing past the LSO
            shares = broker.server.cluster.shares
            tries = _counted(shares)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                blocked = pool.submit(_fetch, waiting, topic_id, 0, member="m2", wait_ms=8000)
                _wait_for(lambda: ("g", "m2") in shares.sessions and tries)  # m2's fetch found nothing: it waits
                assert end_txn(wire, "open", *still_open, True) == ErrorCode.none  # commit marker at 6
                assert _acquired(blocked.result(timeout=7)) == [(4, 6, 1)]  # answered at the commit
            assert len(tries) <= 3  # it waited on the last stable offset: no spinning while the LSO stood still
            assert all(part.records[o].state is RecordState.ACQUIRED for o in range(2, 7))


def test_read_uncommitted_acquires_open_and_aborted_transactions() -> None:
    with Broker() as broker:
        broker.create_topic("t")
        broker.call(broker.server.cluster.store.set_settings({"group-config:g:share.auto.offset.reset": "earliest"}))
        topic_id: uuid.UUID = broker.server.cluster.topic_for("t")[0].topic_id
        with Wire(broker.bootstrap_servers) as wire:
            aborted = _transaction(wire, "aborts", "t", b"a0", b"a1")
            assert end_txn(wire, "aborts", *aborted, False) == ErrorCode.none
            _transaction(wire, "open", "t", b"o0")
            assert _acquired(_fetch(wire, topic_id, 0)) == [(0, 3, 1)]
