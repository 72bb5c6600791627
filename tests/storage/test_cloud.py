"""What only the cloud engine promises: one store shared by several processes.

Two CloudStore instances on one database and bucket stand for two brokers:
offsets stay dense and unique when both append to one partition at once,
appends and namespace changes of one are seen by the other, a repeated
commit assigns nothing twice, and retention removes objects from the bucket.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from kafkacompat.protocol.records import iter_records, record_timestamps
from kafkacompat.storage import Cursor
from storage_testkit import batch, values

from kafkacompat import storage
from kafkacompat.testing.services import BUCKET, ServiceUnavailable, cloud_store


def _urls() -> tuple[str, str]:
    try:
        return cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def pair():
    database, objects = _urls()
    stores = [storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=3)
              for _ in range(2)]
    for st in stores:
        await st.open()
    yield stores
    for st in stores:
        await st.close()


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def statements_sent(monkeypatch) -> list[str]:
    """From now on, every statement any asyncpg connection of this process sends with arguments."""
    import asyncpg.connection

    sent: list[str] = []
    real = asyncpg.connection.Connection._execute

    async def counted(self, query, *args, **kwargs):
        sent.append(query)
        return await real(self, query, *args, **kwargs)

    monkeypatch.setattr(asyncpg.connection.Connection, "_execute", counted)
    return sent


async def read_all(part) -> list[int]:
    """Offsets of every record, reading as a consumer does (a read may return less than asked)."""
    offsets: list[int] = []
    while (offsets[-1] + 1 if offsets else 0) < part.high_watermark:
        offsets += [r.offset for r in iter_records(bytes(await part.read(offsets[-1] + 1 if offsets else 0, 1 << 30)))]
    return offsets


async def test_two_writers_get_dense_unique_offsets(pair):
    a, b = pair
    await a.create_topic("/default", "t", 1)
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    pa, pb = a.partition("/default", "t", 0), b.partition("/default", "t", 0)
    results = await asyncio.gather(*[p.append(batch(3), 3) for _ in range(20) for p in (pa, pb)])
    ranges = sorted((r.base_offset, r.last_offset) for r in results)
    assert ranges == [(3 * i, 3 * i + 2) for i in range(40)]  # dense, each offset once
    await eventually(lambda: pa.high_watermark == pb.high_watermark == 120)
    for p in (pa, pb):
        assert await read_all(p) == list(range(120))


async def test_appends_wake_pollers_of_another_process(pair):
    a, b = pair
    await a.create_topic("/default", "t", 1)
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    waiting = b.partition("/default", "t", 0).wait_for_data(0)
    await a.partition("/default", "t", 0).append(batch(2), 2)
    await asyncio.wait_for(waiting, 5)
    assert b.partition("/default", "t", 0).high_watermark == 2


async def test_namespace_changes_reach_the_other_process(pair):
    a, b = pair
    await a.create_stream("/apps/s")
    info = await a.create_topic("/apps/s", "t", 2, {"retention.ms": "1000"})
    await eventually(lambda: b.get_topic("/apps/s", "t") == info)
    await a.add_partitions("/apps/s", "t", 4)
    await eventually(lambda: b.get_topic("/apps/s", "t").partitions == 4)
    b.partition("/apps/s", "t", 3)
    await a.commit_cursors("/apps/s", "g", [Cursor("t", 3, 7)])
    await eventually(lambda: [c.offset for c in b.get_cursors("/apps/s", "g")] == [7])
    await a.put_state("/apps/s", "txns", {"x": {"n": 1}})
    await eventually(lambda: b.get_state("/apps/s", "txns") == {"x": {"n": 1}})
    await a.set_settings({"k": "v"})
    await eventually(lambda: b.settings() == {"k": "v"})
    waiting = b.partition("/apps/s", "t", 0).wait_for_data(0)
    await a.delete_stream("/apps/s")
    await asyncio.wait_for(waiting, 5)  # pollers of the deleted topic are released
    await eventually(lambda: b.get_stream("/apps/s") is None)
    with pytest.raises(storage.UnknownStreamError):
        b.partition("/apps/s", "t", 0)


@pytest.mark.parametrize("read", ["read_cursors", "read_stream_contents"])
async def test_a_view_read_back_never_hides_a_commit_this_process_made_meanwhile(pair, monkeypatch, read):
    """Another broker's change makes this one read the group's cursors (its commit) or the whole stream
    (an edit of the stream; a reload after a database outage does the same) from the database. An
    OffsetCommit of this broker answered while that read was under way was in the view, and the read,
    begun before it, replaced it: the group's committed offset read back lower (chaos, cloud, seed 12)."""
    a, b = pair
    await a.create_stream("/apps/s")
    await a.create_topic("/apps/s", "t", 2)
    await a.commit_cursors("/apps/s", "g", [Cursor("t", 0, 5)])
    await eventually(lambda: b.get_stream("/apps/s") is not None)
    real, racing = getattr(storage.cloud.catalog, read), []

    async def read_then_commit(*args):  # only `a` reads (a change of b's): its commit lands in between
        found = await real(*args)
        if not racing:
            racing.append(True)
            await a.commit_cursors("/apps/s", "g", [Cursor("t", 0, 9)])
        return found

    monkeypatch.setattr(storage.cloud.catalog, read, read_then_commit)
    if read == "read_stream_contents":
        await b.edit_stream("/apps/s", a.get_stream("/apps/s").policy)
        await b.commit_cursors("/apps/s", "h", [Cursor("t", 1, 3)])  # a applies it after the edit
        await eventually(lambda: bool(a.get_cursors("/apps/s", "h")))
    else:
        await b.commit_cursors("/apps/s", "g", [Cursor("t", 1, 3)])
        await eventually(lambda: {c.partition: c.offset for c in a.get_cursors("/apps/s", "g")}.get(1) == 3)
    assert racing
    assert {c.partition: c.offset for c in a.get_cursors("/apps/s", "g")}[0] == 9


async def test_a_read_raced_by_commits_without_a_pause_still_ends(pair, monkeypatch):
    """A group committing after every message races every read of its cursors. Each raced read was
    read again for as long as the commits came, so another broker's change of the group never reached
    this broker's view. Now, after a few raced reads, one read holds this broker's commits back."""
    a, b = pair
    await a.create_stream("/apps/s")
    await a.create_topic("/apps/s", "t", 2)
    await a.commit_cursors("/apps/s", "g", [Cursor("t", 0, 1)])
    await eventually(lambda: b.get_stream("/apps/s") is not None)
    real, commits, committing = storage.cloud.catalog.read_cursors, [], [True]

    async def read_while_committing(*args):  # every read (a's, and b's of a's commits) meets a commit
        found = await real(*args)
        if committing:
            commit = asyncio.create_task(a.commit_cursors("/apps/s", "g", [Cursor("t", 0, 10 + len(commits))]))
            commits.append(commit)
            await asyncio.wait({commit}, timeout=0.5)  # a commit the read holds back goes on after it
        return found

    monkeypatch.setattr(storage.cloud.catalog, "read_cursors", read_while_committing)
    await b.commit_cursors("/apps/s", "g", [Cursor("t", 1, 3)])
    try:
        await eventually(lambda: {c.partition: c.offset for c in a.get_cursors("/apps/s", "g")}.get(1) == 3, 20)
    finally:
        committing.clear()
        await asyncio.gather(*commits)
    assert len(commits) > 3  # the reads were raced, and more than RACED_READS times

    def partition_0(store) -> int:
        return {c.partition: c.offset for c in store.get_cursors("/apps/s", "g")}[0]

    await eventually(lambda: partition_0(b) == partition_0(a))  # b read the database after a's last commit
    assert partition_0(a) >= 10


async def test_settings_set_at_once_by_two_brokers_keep_both(pair):
    """Brokers starting together each record settings (the cluster name): no collision, no lost key."""
    a, b = pair
    for _ in range(5):  # the race is between two transactions: give it several chances
        await asyncio.gather(a.set_settings({"from-a": "1", "shared": "a"}), b.set_settings({"from-b": "1", "shared": "b"}))
    await eventually(lambda: {"from-a", "from-b"} <= a.settings().keys() and {"from-a", "from-b"} <= b.settings().keys())
    await a.set_settings({"from-a": None})
    await eventually(lambda: "from-a" not in b.settings() and b.settings().get("from-b") == "1")


async def test_a_repeated_commit_assigns_nothing_twice(pair):
    a, _ = pair
    await a.create_topic("/default", "t", 1)
    pid = a.partition("/default", "t", 0).pid
    key = a.objects.new_key()
    data = batch(2)
    await a.objects.put(key, data)
    args = (key, len(data), [pid], [2], [0], [len(data)], [1000], [-1])
    first = await a._commit(*args)
    again = await a._commit(*args)  # as after an answer lost on the network
    assert first == again and first[0][1] == 0
    await a.partition("/default", "t", 0).append(batch(1), 1)
    assert a.partition("/default", "t", 0).high_watermark == 3


async def test_an_append_under_a_superseded_leader_epoch_is_refused_by_the_commit(pair):
    """Fencing by the database: a batch buffered by a deposed leader is not stored, whatever its timing."""
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, b = pair
    await a.create_topic("/default", "t", 1)
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)  # the cluster layer's leader table, in the store's database
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', 't', 0, 1, 3)")
        pa, pb = a.partition("/default", "t", 0), b.partition("/default", "t", 0)
        assert (await pa.append(batch(2), 2, leader_epoch=3)).base_offset == 0
        real_put, release = a.writer._put, asyncio.Event()

        async def paused_put(key: str, body: bytes) -> None:
            await release.wait()
            await real_put(key, body)

        a.writer._put = paused_put  # the deposed leader's batch waits on its way to the commit ...
        stale = asyncio.ensure_future(pa.append(batch(5), 5, leader_epoch=3))
        await asyncio.sleep(0)
        assert not stale.done()
        # ... while leadership moves (as the cluster's conditional UPDATE does) and the new leader appends
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = epoch + 1")
        assert (await pb.append(batch(1), 1, leader_epoch=4)).base_offset == 2
        release.set()
        with pytest.raises(storage.NotLeaderError) as refused:
            await stale
        assert refused.value.epoch == 4
        assert (await pb.append(batch(1), 1, leader_epoch=4)).base_offset == 3
        with pytest.raises(storage.NotLeaderError):  # an append under an epoch not yet reached: refused too
            await pb.append(batch(1), 1, leader_epoch=5)
        await eventually(lambda: pa.high_watermark == 4)
        assert await read_all(pa) == [0, 1, 2, 3]  # dense: nothing of the refused batch
        data = bytes(await pb.read(2, 1 << 20))
        assert struct.unpack_from(">qii", data, 0)[2] == 4  # batches carry the leader table's epoch
        assert [e for e in await b.index.epochs(pb.pid) if e[0] in (3, 4)] == [(3, 0), (4, 2)]
    finally:
        await conn.close()


def txn_batch(producer_id: int, value: bytes = b"v") -> bytes:
    from kafkacompat.protocol.control_records import set_attributes
    from kafkacompat.protocol.records import ATTR_TRANSACTIONAL, Record, build_batch

    data = build_batch([Record(None, value, [], 1000)], producer_id=producer_id, producer_epoch=0, base_sequence=0)
    return set_attributes(data, ATTR_TRANSACTIONAL)


async def test_a_transactional_batch_is_not_stored_after_its_producers_marker_written_meanwhile(pair):
    """The leader (a) admitted a transactional batch when the partition ended at `since`; the batch waits on
    its way to the commit (an object store outage) while the coordinator's broker (b) writes the producer's
    abort marker. Stored after the marker it would join the producer's next transaction, and a read_committed
    consumer would be served a record its producer was told failed (chaos, cloud: an aborted read). It is
    refused; another producer's batch and the producer's next transaction's (admitted after the marker) are
    stored."""
    from kafkacompat.protocol.control_records import ControlType, build_marker

    a, b = pair
    await a.create_topic("/default", "t", 1)
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    pa, pb = a.partition("/default", "t", 0), b.partition("/default", "t", 0)
    assert (await pa.append(txn_batch(7), 1, txn_since=0)).base_offset == 0
    since = pa.high_watermark
    real_put, release = a.writer._put, asyncio.Event()

    async def paused_put(key: str, body: bytes) -> None:
        await release.wait()
        await real_put(key, body)

    a.writer._put = paused_put
    late = asyncio.ensure_future(pa.append(txn_batch(7, b"late"), 1, txn_since=since))
    other = asyncio.ensure_future(pa.append(txn_batch(8), 1, txn_since=since))
    await asyncio.sleep(0)
    assert (await pb.append(build_marker(7, 0, ControlType.ABORT, 2000), 1)).base_offset == 1
    release.set()
    with pytest.raises(storage.TransactionEndedError):
        await late
    assert (await other).base_offset == 2
    a.writer._put = real_put
    assert (await pa.append(txn_batch(7, b"next"), 1, txn_since=pa.high_watermark)).base_offset == 3
    data = bytes(await pa.read(0, 1 << 20))
    assert b"next" in data and b"late" not in data and pa.high_watermark == 4


async def test_a_repeated_commit_of_a_fenced_batch_is_refused_again(pair):
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, _ = pair
    await a.create_topic("/default", "t", 1)
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', 't', 0, 1, 7)")
    finally:
        await conn.close()
    part = a.partition("/default", "t", 0)
    key = a.objects.new_key()
    data = batch(2)
    await a.objects.put(key, data)
    args = (key, len(data), [part.pid], [2], [0], [len(data)], [1000], [6])
    first = await a._commit(*args)
    again = await a._commit(*args)  # as after an answer lost on the network
    assert first[0][1:3] == (-2, 7) and again[0][1] == -2
    await part.refresh()
    assert part.high_watermark == 0


async def test_a_repeated_commit_of_a_batch_whose_transaction_ended_is_refused_again(pair):
    """As a fenced batch's: the answer of a commit lost on the network is asked again, and the refusal is
    told as the transaction's end (a fence would send the producer to look for another leader)."""
    from kafkacompat.protocol.control_records import ControlType, build_marker
    from kafkacompat.storage.cloud.writer import TXN_ENDED, batch_head

    a, _ = pair
    await a.create_topic("/default", "t", 1)
    part = a.partition("/default", "t", 0)
    await part.append(build_marker(7, 0, ControlType.ABORT, 2000), 1)
    key = a.objects.new_key()
    data = txn_batch(7)
    await a.objects.put(key, data)
    args = (key, len(data), [part.pid], [1], [0], [len(data)], [1000], [-1], None, None, None, None,
            [batch_head(data)], [0])
    first = await a._commit(*args)
    again = await a._commit(*args)  # as after an answer lost on the network
    assert first[0][1] == TXN_ENDED and again[0][1] == TXN_ENDED
    await part.refresh()
    assert part.high_watermark == 1


async def test_a_batch_whose_client_left_while_it_waited_is_not_committed(pair):
    """The broker was paused (or the object store slow) past the client's request timeout: the client
    closed the connection and resent the batch elsewhere. Committed on waking, this copy was a duplicate
    (the cloud campaign's plain producer, after pauses). It is refused; a batch of a client still there,
    in the same object, is stored, and so is what the client sends on its next connection."""
    a, _ = pair
    await a.create_topic("/default", "t", 1)
    part = a.partition("/default", "t", 0)
    real_put, release = a.writer._put, asyncio.Event()

    async def paused_put(key: str, body: bytes) -> None:
        await release.wait()
        await real_put(key, body)

    a.writer._put = paused_put
    client_left = [False]
    waiting = asyncio.ensure_future(part.append(batch(1, size=4), 1, client_gone=lambda: client_left[0]))
    staying = asyncio.ensure_future(part.append(batch(1, size=5), 1, client_gone=lambda: False))
    await asyncio.sleep(0)
    client_left[0] = True  # the client timed out and closed while the object was being written
    release.set()
    with pytest.raises(storage.RequesterGoneError):
        await waiting
    assert (await staying).base_offset == 0
    a.writer._put = real_put
    assert (await part.append(batch(1, size=6), 1, client_gone=lambda: False)).base_offset == 1
    assert [len(value) for _, value in values(await part.read(0, 1 << 20))] == [5, 6]


async def test_a_partitions_batches_are_committed_in_the_order_they_were_appended(pair):
    """Objects are written concurrently, but a partition's batches in a later object wait for the
    earlier object's commit; when that one fails, the later batches of its partitions fail too."""
    a, _ = pair
    await a.create_topic("/default", "t", 2)
    p0, p1 = a.partition("/default", "t", 0), a.partition("/default", "t", 1)
    real_put, puts, release = a.writer._put, [], asyncio.Event()
    failing = [False]

    async def put(key: str, body: bytes) -> None:
        puts.append(key)
        if len(puts) % 2 == 1:  # the first object of each round is slow (and may fail)
            await release.wait()
            if failing[0]:
                raise OSError("injected: the object store refused the write")
        await real_put(key, body)

    a.writer._put = put
    a.writer.flush_ms = 60_000
    try:
        for failing[0] in (False, True):
            release.clear()
            puts.clear()
            first = asyncio.ensure_future(p0.append(batch(1), 1))
            await asyncio.sleep(0)
            a.writer.flush()
            second = asyncio.ensure_future(p0.append(batch(2), 2))
            other = asyncio.ensure_future(p1.append(batch(3), 3))
            await asyncio.sleep(0)
            a.writer.flush()
            await eventually(lambda: len(puts) == 2)
            done, _ = await asyncio.wait({second, other}, timeout=1.0)  # its object is written: its commit waits
            assert not done
            release.set()
            if not failing[0]:
                assert [(await f).base_offset for f in (first, second, other)] == [0, 1, 0]
                continue
            for refused in (first, second):
                with pytest.raises(storage.StorageUnavailableError):
                    await refused
            assert (await other).base_offset == 3  # another partition in the same object is stored
    finally:
        release.set()  # a failed assertion must not leave a write waiting (closing the store waits for it)
    assert await read_all(p0) == [0, 1, 2] and p0.high_watermark == 3


async def test_a_batch_appended_behind_a_write_that_fails_before_it_is_flushed_is_not_stored(pair):
    """The write a batch must follow is the one under way when the batch is appended, not when its
    own object is flushed: the earlier one may fail in between, and then this one must fail too."""
    a, _ = pair
    await a.create_topic("/default", "t", 1)
    part = a.partition("/default", "t", 0)
    real_put, puts, release = a.writer._put, [], asyncio.Event()

    async def put(key: str, body: bytes) -> None:
        puts.append(key)
        if len(puts) == 1:
            await release.wait()
            raise OSError("injected: the object store refused the write")
        await real_put(key, body)

    a.writer._put = put
    a.writer.flush_ms = 60_000
    try:
        first = asyncio.ensure_future(part.append(batch(1), 1))
        await asyncio.sleep(0)
        a.writer.flush()
        await eventually(lambda: len(puts) == 1)
        second = asyncio.ensure_future(part.append(batch(2), 2))  # while the first is being written
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(storage.StorageUnavailableError):
            await first
        await eventually(lambda: not a.writer._tasks)  # the first write is over
        a.writer.flush()  # the second batch's object only now
        with pytest.raises(storage.StorageUnavailableError):
            await second
    finally:
        release.set()
    assert part.high_watermark == 0
    resent = asyncio.ensure_future(part.append(batch(3), 3))  # the producer's resend, in order
    await asyncio.sleep(0)
    a.writer.flush()
    assert (await resent).base_offset == 0
    assert await read_all(part) == [0, 1, 2]


async def test_appends_go_when_the_upload_before_them_ends_not_after_a_timer(pair):
    """Group commit: with nothing being uploaded an append is written at once; appends made while an
    upload is under way gather into one object that goes as soon as that upload ends. flush_ms
    (here a minute) bounds only how long they wait for it."""
    a, _ = pair
    await a.create_topic("/default", "t", 2)
    p0, p1 = a.partition("/default", "t", 0), a.partition("/default", "t", 1)
    real_put, puts, release = a.writer._put, [], asyncio.Event()

    async def put(key: str, body: bytes) -> None:
        puts.append(len(body))
        if len(puts) == 1:
            await release.wait()
        await real_put(key, body)

    a.writer._put = put
    a.writer.flush_ms = 60_000
    try:
        first = asyncio.ensure_future(p0.append(batch(1), 1))
        await eventually(lambda: len(puts) == 1)  # no timer: written while nothing else is
        later = [asyncio.ensure_future(p.append(batch(2), 2)) for p in (p0, p1, p1)]
        await asyncio.sleep(0.2)
        assert len(puts) == 1  # gathered behind the upload under way
        release.set()
        assert (await asyncio.wait_for(first, 10)).base_offset == 0
        assert [(await asyncio.wait_for(f, 10)).base_offset for f in later] == [1, 0, 2]
        assert len(puts) == 2  # the three in one object
    finally:
        release.set()


async def test_appends_made_while_every_write_slot_is_taken_go_as_one_object(pair):
    """A producer with many requests in flight (librdkafka without idempotence sends one per batch)
    appends faster than the object store takes uploads. What it appends while every write slot is
    taken gathers and goes as one object when a write ends. Before, each flush_ms made its own tiny
    object that queued for a slot: two such producers on three brokers had every acknowledgement
    2-4 s late, growing, at 100 messages/s (the kill loop's acks=1 producer)."""
    a, _ = pair
    await a.create_topic("/default", "t", 1)
    part = a.partition("/default", "t", 0)
    real_put, puts, release = a.writer._put, [], asyncio.Event()

    async def put(key: str, body: bytes) -> None:
        puts.append(len(body))
        await release.wait()
        await real_put(key, body)

    a.writer._put = put
    appends = []
    try:
        for _ in range(8):  # one object each (flush_ms is 3 ms): every slot taken
            appends.append(asyncio.ensure_future(part.append(batch(1), 1)))
            await eventually(lambda: len(puts) == len(appends))
        for _ in range(20):  # each alone for longer than flush_ms, while no slot is free
            appends.append(asyncio.ensure_future(part.append(batch(1), 1)))
            await asyncio.sleep(0.01)
        release.set()
        assert [(await asyncio.wait_for(f, 30)).base_offset for f in appends] == list(range(28))
        assert len(puts) == 9, puts  # the 20 in one object, not 20 behind the slots
    finally:
        release.set()
    assert await read_all(part) == list(range(28))


def cold_and_counting_gets(store) -> list[str]:
    """The keys of every GET `store` makes from now on, its cache emptied first (read as another broker,
    or after a restart, would)."""
    real_get, gets = store.index.objects.get_range, []

    async def get_range(key: str, start: int, end: int) -> bytes:
        gets.append(key)
        return await real_get(key, start, end)

    store.index.objects.get_range = get_range
    store.cache.__init__(store.cache.capacity)
    return gets


async def test_a_read_of_a_backlog_of_small_objects_waits_for_a_bounded_number_of_gets(pair):
    """A plain producer's one-record batches each in an object of their own, read with a cold cache
    (another broker, or after a restart): one read takes at most READ_GETS of them, so a Fetch
    answers after two rounds of GETs instead of one per batch of the 500 index rows it asked for
    (5.1 s before a consumer's first record, for 4,000 such batches). The next read goes on."""
    from kafkacompat.storage.cloud.partition import READ_GETS

    a, b = pair
    await a.create_topic("/default", "t", 1)
    writing = a.partition("/default", "t", 0)
    for _ in range(READ_GETS * 2 + 5):  # one after another: an object each
        await writing.append(batch(1), 1)
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    part = b.partition("/default", "t", 0)
    await eventually(lambda: part.high_watermark == READ_GETS * 2 + 5)
    gets = cold_and_counting_gets(b)
    first = [r.offset for r in iter_records(bytes(await part.read(0, 1 << 30)))]
    assert first == list(range(READ_GETS)) and len(gets) == READ_GETS
    assert await read_all(part) == list(range(READ_GETS * 2 + 5))  # the rest in the reads that follow
    assert len(gets) == READ_GETS * 2 + 5  # each object read once: what was read is cached


async def test_a_small_object_is_fetched_whole_once_for_every_partition_in_it(pair):
    """A flush at a low rate puts a batch of every partition its broker leads in one small object, and a
    consumer of them all read it with a ranged GET per partition: the kill loop's read-back of six
    partitions' backlog took over 60 s from moto. Read cold by another broker, both partitions at once
    as one Fetch reads them, each object is fetched once, whole, and the other partition's batch comes
    from the cache."""
    a, b = pair
    await a.create_topic("/default", "t", 2)
    writing = [a.partition("/default", "t", i) for i in range(2)]
    for _ in range(10):
        await asyncio.gather(*(part.append(batch(1), 1) for part in writing))  # appended in one turn: one object
    await eventually(lambda: b.get_topic("/default", "t") is not None)
    parts = [b.partition("/default", "t", i) for i in range(2)]
    await eventually(lambda: all(part.high_watermark == 10 for part in parts))
    gets = cold_and_counting_gets(b)
    assert await asyncio.gather(*map(read_all, parts)) == [list(range(10))] * 2
    assert len(gets) == len(set(gets)) == 10, gets


async def test_stored_bytes_carry_the_assigned_offset_only_when_read(pair):
    a, _ = pair
    await a.create_topic("/default", "t", 1)
    part = a.partition("/default", "t", 0)
    await part.append(batch(5), 5)
    result = await part.append(batch(2), 2)
    a.cache.__init__(a.cache.capacity)  # forget the cache: read from the bucket
    data = await part.read(5, 1 << 20)
    base, _, epoch = struct.unpack_from(">qii", data, 0)
    assert (base, epoch) == (result.base_offset, part.leader_epoch) and a.cache.misses >= 1


async def test_retention_deletes_unreferenced_objects(pair):
    a, _ = pair
    a.object_grace_ms = 0
    await a.create_topic("/default", "t", 1, {"retention.ms": "60000"})
    part = a.partition("/default", "t", 0)
    for i in range(5):
        await part.append(batch(2, ts=1_000 + i), 2)
    from kafkacompat.testing import services

    _, s3 = services._shared
    prefix = a.objects.prefix + "/data/"
    assert len(s3.keys(BUCKET, prefix)) == 5
    now = 1_000 + 3_600_000
    await part.append(batch(1, ts=now), 1)
    assert await a.enforce_retention(now) == 1
    assert part.log_start_offset == 10
    await a.enforce_retention(now + 1)  # the grace time (0 here) has passed on this pass
    assert len(s3.keys(BUCKET, prefix)) == 1
    assert [r.offset for r in iter_records(bytes(await part.read(10, 1 << 20)))] == [10]


async def test_a_marker_is_fenced_by_its_coordinators_epoch_and_stamped_with_the_leader_tables(pair):
    """A transaction marker is written by the coordinator, which leads its __consumer_offsets
    partition, not the one marked: the commit checks the coordinator's epoch and stamps the
    batch with the marked partition's leader epoch, never the store's open counter."""
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, b = pair
    await a.create_topic("/default", "t", 1)
    await a.create_topic("/default", "__consumer_offsets", 1)
    await eventually(lambda: b.get_topic("/default", "__consumer_offsets") is not None)
    assert min(a.epoch, b.epoch) >= 1  # the open counter, above the leader epoch 0 below
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', 't', 0, 2, 0), "
                           "('/default', '__consumer_offsets', 0, 1, 0)")
        data, guard = a.partition("/default", "t", 0), a.partition("/default", "__consumer_offsets", 0)
        assert (await data.append(batch(1), 1, leader_epoch=0, fenced_by=guard)).base_offset == 0
        # the coordinator is deposed (its lease lapsed, another broker took its partition) ...
        await conn.execute("UPDATE kc_partition_leaders SET leader = 3, epoch = epoch + 1 "
                           "WHERE topic = '__consumer_offsets'")
        with pytest.raises(storage.NotLeaderError) as refused:  # ... so its marker is refused
            await data.append(batch(1), 1, leader_epoch=0, fenced_by=guard)
        assert refused.value.epoch == 1
        # the next coordinator's lands, on a partition whose own leader moved meanwhile too
        await conn.execute("UPDATE kc_partition_leaders SET epoch = 5 WHERE topic = 't'")
        assert (await data.append(batch(1), 1, leader_epoch=1, fenced_by=guard)).base_offset == 1
        await data.refresh()
        assert data.high_watermark == 2  # dense: nothing of the refused marker
        stamped = [struct.unpack_from(">qii", bytes(await data.read(o, 1 << 20)), 0)[2] for o in (0, 1)]
        assert stamped == [0, 5]  # the leader table's epochs of the marked partition
        assert await b.index.epochs(data.pid) == [(5, 1)]  # epoch 0 is where every partition starts
        assert await data.end_offset_for_epoch(0, current=5) == (0, 1)
        assert await data.end_offset_for_epoch(5, current=5) == (5, 2)
    finally:
        await conn.close()


async def test_a_deposed_coordinators_late_offset_commit_is_refused_and_the_offset_never_goes_back(pair):
    """A group's offsets are written under its coordinator's __consumer_offsets leader epoch: once
    another broker took the partition and committed, the old coordinator's late commit (it still
    believed it led until its next lease renewal) is refused and writes nothing."""
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, b = pair
    await a.create_topic("/default", "t", 1)
    await a.create_topic("/default", "__consumer_offsets", 1)
    await eventually(lambda: b.get_topic("/default", "__consumer_offsets") is not None)
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', '__consumer_offsets', 0, 1, 3)")
        await a.commit_cursors("/default", "g", [Cursor("t", 0, 5)], fence=("/default", "__consumer_offsets", 0, 3))
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")  # B took the partition
        await b.commit_cursors("/default", "g", [Cursor("t", 0, 10)], fence=("/default", "__consumer_offsets", 0, 4))
        with pytest.raises(storage.NotLeaderError) as refused:  # A's commit, delayed past the move
            await a.commit_cursors("/default", "g", [Cursor("t", 0, 7)], fence=("/default", "__consumer_offsets", 0, 3))
        assert refused.value.epoch == 4
        stored = await conn.fetchval("SELECT \"offset\" FROM kc_cursors WHERE grp = 'g' AND topic = 't' AND part = 0")
        assert stored == 10
        await eventually(lambda: [c.offset for c in a.get_cursors("/default", "g")] == [10])
        assert [c.offset for c in b.get_cursors("/default", "g")] == [10]
    finally:
        await conn.close()


async def test_a_replicated_batch_under_a_superseded_epoch_is_refused(pair):
    """A copy from another cluster (append at an offset) is fenced like a produced batch."""
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, _ = pair
    await a.create_topic("/default", "t", 1)
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', 't', 0, 1, 2)")
        part = a.partition("/default", "t", 0)
        assert (await part.append(batch(2), 2, at=0, leader_epoch=2)).base_offset == 0
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 3")
        with pytest.raises(storage.NotLeaderError):
            await part.append(batch(2), 2, at=2, leader_epoch=2)
        await part.refresh()
        assert part.high_watermark == 2 and await read_all(part) == [0, 1]
        assert struct.unpack_from(">qii", bytes(await part.read(0, 1 << 20)), 0)[2] == 2
    finally:
        await conn.close()


@pytest.mark.parametrize("notified_first", [True, False], ids=["notified-first", "refused-first"])
async def test_a_create_lost_to_another_process_leaves_the_winners_topic_listed(pair, monkeypatch, notified_first):
    """Brokers race to create __consumer_offsets. The loser's create is refused; its view must then
    list the winner's topic, whether the winner's notification was applied while the losing create
    was in flight (it replaced the loser's registration, which the refusal must not take away with
    it: the loser then listed no such topic until another change of it) or is still to come."""
    a, b = pair
    persist = b._persist_topics
    won: list[storage.TopicInfo] = []
    opened: list[storage.Partition] = []

    async def lose_the_race(stream, topics) -> None:
        won.append(await a.create_topic("/default", "t", 3))
        if notified_first:
            await eventually(lambda: b.get_topic("/default", "t") == won[0])
            opened.append(b.partition("/default", "t", 2))  # a fetch of the winner's topic waits on it
        await persist(stream, topics)

    monkeypatch.setattr(b, "_persist_topics", lose_the_race)
    with pytest.raises(storage.TopicExistsError):
        await b.create_topic("/default", "t", 3)
    assert b.get_topic("/default", "t") == won[0]
    assert b.get_topic_by_id(won[0].topic_id) == won[0]
    served = opened[0] if opened else b.partition("/default", "t", 2)
    assert b.partition("/default", "t", 2) is served
    waiting = served.wait_for_data(0)
    await a.partition("/default", "t", 2).append(batch(2), 2)
    await asyncio.wait_for(waiting, 5)  # the partition opened before the refusal is the one served and woken
    await eventually(lambda: b.partition("/default", "t", 2).high_watermark == 2)


async def test_a_database_left_at_schema_version_1_is_migrated_and_takes_appends():
    """An older broker's database (version 1's tables, none of today's functions): opening
    migrates it, functions included (every kc_commit signature older brokers call), and it works."""
    import uuid

    import asyncpg
    from kafkacompat.storage.cloud import schema

    database, objects = _urls()
    conn = await asyncpg.connect(database)
    try:
        await conn.execute(schema.MIGRATIONS[0])
        await conn.execute("INSERT INTO kc_meta (schema_version, store_id) VALUES (1, $1)", uuid.uuid4())
    finally:
        await conn.close()
    st = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=3)
    await st.open()
    try:
        await st.create_topic("/default", "t", 1)
        part = st.partition("/default", "t", 0)
        await part.append(batch(3), 3)
        assert await read_all(part) == [0, 1, 2]
    finally:
        await st.close()
    conn = await asyncpg.connect(database)
    try:
        assert await conn.fetchval("SELECT schema_version FROM kc_meta") == len(schema.MIGRATIONS)
        arities = await conn.fetch("SELECT pronargs FROM pg_proc WHERE proname = 'kc_commit' ORDER BY 1")
        assert [r["pronargs"] for r in arities] == [9, 10, 13, 14, 15, 16, 17]
    finally:
        await conn.close()


async def test_a_new_leaders_tail_scan_reads_the_headers_from_the_index_not_the_objects(pair):
    """A broker taking a partition over rebuilds its producers' state from the log tail. Read from
    the objects, one round trip per batch, that scan grew with the log and each failover of a
    cluster took longer than the one before (issue 37); the index keeps each batch's header (a
    marker whole), so it reads none."""
    from kafkacompat.protocol.control_records import ControlType, build_marker, marker_coordinator_epoch
    from kafkacompat.protocol.records import Record, build_batch

    from kafkacompat.catalog.log_tail import tail_batches

    a, b = pair
    await a.create_topic("/default", "t", 1)
    writer = a.partition("/default", "t", 0)
    for seq in range(0, 6, 2):
        data = build_batch([Record(None, b"v", [], 1)] * 2, producer_id=7, producer_epoch=3, base_sequence=seq)
        await writer.append(data, 2)
    await writer.append(build_marker(7, 3, ControlType.COMMIT, 1000, coordinator_epoch=5), 1)
    reader = b.partition("/default", "t", 0)
    await reader.refresh()
    gets = []
    real_get = b.objects.get_range

    async def counted(key, start, end):
        gets.append(key)
        return await real_get(key, start, end)

    b.objects.get_range = counted
    seen = [(h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta, h.is_control,
             marker_coordinator_epoch(data) if h.is_control else None)
            async for h, data in tail_batches(reader)]
    assert seen == [(0, 7, 3, 0, 1, False, None), (2, 7, 3, 2, 1, False, None), (4, 7, 3, 4, 1, False, None),
                    (6, 7, 3, -1, 0, True, 5)]
    assert gets == []


async def test_appends_waiting_for_a_write_are_refused_at_once_and_never_stored_when_abandoned():
    """A broker that stops leading a partition refuses its appends still waiting for a commit at
    once (NOT_LEADER_OR_FOLLOWER to the producer), and none of them is stored afterwards: the
    producer's retry to the new leader is then the only copy. Appends of other partitions in the
    same write are stored."""
    database, objects = _urls()
    st = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=60_000)
    await st.open()
    try:
        await st.create_topic("/default", "t", 2)
        moved, kept = st.partition("/default", "t", 0), st.partition("/default", "t", 1)
        waiting = [moved.append(batch(1), 1), moved.append(batch(2), 2), kept.append(batch(1), 1)]
        assert moved.abandon_appends(storage.NotLeaderError("moved away", -1)) == 2
        for refused in waiting[:2]:
            with pytest.raises(storage.NotLeaderError):
                await asyncio.wait_for(refused, 1)  # at once, not after the 60 s flush
        st.writer.flush()
        assert (await asyncio.wait_for(waiting[2], 30)).base_offset == 0
        await moved.refresh()
        assert moved.high_watermark == 0
        assert moved.abandon_appends(storage.NotLeaderError("moved away", -1)) == 0
        again = moved.append(batch(1), 1)  # leading it again later: appends are stored as before
        st.writer.flush()
        assert (await asyncio.wait_for(again, 30)).base_offset == 0
    finally:
        await st.close()



async def test_a_store_closing_during_a_retention_pass_stops_it():
    """A SIGTERM while a retention pass waits on the database: the store closes. In the 60-minute cloud
    campaign 11 of 49 SIGTERMs did not stop the broker: the cancelled pass's cleanup (releasing its
    advisory lock on the connection whose statement the cancellation cut) failed, that error took the
    cancellation's place, the loop took it for a pass the database failed and slept until the next one
    (60 s), and the store's close waited for it. Here the pass ends that way too."""
    database, objects = _urls()
    st = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=3,
                            retention_check_ms=50)
    await st.open()
    in_pass = asyncio.Event()

    async def pass_whose_cleanup_fails(partitions, now, grace):
        st.retention_check_ms = 3_600_000  # the next pass is an hour away
        in_pass.set()
        try:
            await asyncio.sleep(30)  # the database is slow to answer
        except asyncio.CancelledError:
            raise storage.StorageUnavailableError("a retention pass failed: the database is unavailable") from None

    st.retention.run = pass_whose_cleanup_fails
    await asyncio.wait_for(in_pass.wait(), 10)
    await asyncio.wait_for(st.close(), 20)


async def test_a_retention_pass_cancelled_on_the_database_leaves_its_lock_to_the_next_pass():
    """The store's pool lends a connection on without asyncpg's reset, which cost a round trip on every
    release and also dropped a session lock a cancelled pass left behind. A pass cancelled while its
    statement waits on the database releases its lock itself (or closes its connection): the next pass,
    here another broker's, takes it."""
    import asyncpg
    from kafkacompat.storage.cloud.retention import RETENTION_LOCK

    database, objects = _urls()
    st = storage.open_store(database, object_store=objects, flush_ms=3)
    await st.open()
    blocker, other = await asyncpg.connect(database), await asyncpg.connect(database)
    try:
        await st.create_topic("/default", "t", 1)
        pid = await other.fetchval("SELECT id FROM kc_partitions LIMIT 1")
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("LOCK TABLE kc_batches IN ACCESS EXCLUSIVE MODE")
        running = asyncio.ensure_future(st.retention.run([(pid, 0, None)], 1, 0))
        deadline = asyncio.get_running_loop().time() + 10
        while not await other.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                       "AND datname = current_database()"):
            assert asyncio.get_running_loop().time() < deadline, "the pass never waited on kc_batches"
            await asyncio.sleep(0.01)
        assert not await other.fetchval("SELECT pg_try_advisory_lock($1)", RETENTION_LOCK)  # the pass holds it
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        deadline = asyncio.get_running_loop().time() + 10
        while not await other.fetchval("SELECT pg_try_advisory_lock($1)", RETENTION_LOCK):
            assert asyncio.get_running_loop().time() < deadline, "the cancelled pass kept the retention lock"
            await asyncio.sleep(0.05)
        await holding.rollback()
        await other.execute("SELECT pg_advisory_unlock($1)", RETENTION_LOCK)
        await st.create_topic("/default", "u", 1)  # the pool still lends working connections
    finally:
        await blocker.close()
        await other.close()
        await st.close()


async def test_a_store_opening_on_thousands_of_topics_reads_them_in_a_few_statements(monkeypatch):
    """A broker starting on a store reads every topic and partition row. Read topic by topic, with a
    statement for the topic, one for its partitions and the pool's reset, 20,000 topics took 21 s
    before the broker listened (issue 32). Counted here: the statements opening sends with 2,000
    topics present do not grow with them."""
    import asyncpg

    database, objects = _urls()
    first = storage.open_store(database, object_store=objects)
    await first.open()
    await first.create_stream("/iot")
    await first.close()
    db = await asyncpg.connect(database)
    try:
        await db.execute("INSERT INTO kc_topics SELECT gen_random_uuid(), '/iot', 'device-' || i, 2, '{}'::jsonb, 0 "
                         "FROM generate_series(1, 2000) i")
        await db.execute("INSERT INTO kc_partitions (topic_id, idx) SELECT id, i FROM kc_topics, generate_series(0, 1) i")
    finally:
        await db.close()
    sent = statements_sent(monkeypatch)
    st = storage.open_store(database, object_store=objects)
    await st.open()
    try:
        assert len(st.list_topics("/iot")) == 2000 and st.partition_count() == 4000
        assert len(sent) < 100, f"{len(sent)} statements to open on 2,000 topics"
    finally:
        await st.close()


async def test_partitions_gained_together_are_read_afresh_in_one_statement(pair, monkeypatch):
    """A broker that becomes the leader of many partitions at once (its start, or a broker's death)
    reads their offsets afresh before serving them: one statement for all, where one each made a
    broker starting as the leader of 20,000 partitions spend 10 s on them. Unknown ones are left out."""
    a, b = pair
    await a.create_topic("/default", "many", 300)
    await eventually(lambda: b.get_topic("/default", "many") is not None)
    for index in (0, 299):
        st = b.partition("/default", "many", index)
        appended = st.append(batch(3), 3)
        b.writer.flush()
        await asyncio.wait_for(appended, 30)
    sent = statements_sent(monkeypatch)
    await a.refresh_many([("/default", "many", i) for i in range(300)] + [("/default", "gone", 0)])
    assert len(sent) == 1, sent
    assert [a.partition("/default", "many", i).high_watermark for i in (0, 1, 299)] == [3, 0, 3]


async def test_each_store_keeps_a_running_partition_count_through_the_others_changes(pair):
    """CreateTopics checks the per-broker partition limit with every topic: walking every topic
    for it made creating N topics cost N² (a 1,000-topic request took over a minute at 10,000
    topics). Each store counts as topics come and go, its own and those another store made."""
    a, b = pair
    assert a.partition_count() == b.partition_count() == 0  # the one walk each: the count starts here
    await a.create_stream("/iot")
    for i in range(6):
        await a.create_topic("/iot", f"t{i}", 1 + i % 3)
    await b.create_topic("/default", "plain", 2)
    await a.add_partitions("/iot", "t0", 5)
    await a.delete_topic("/iot", "t1")
    await b.create_stream("/gone")
    await b.create_topic("/gone", "x", 3)

    def walked(store) -> int:
        return sum(topic.partitions for topic in store.list_topics())

    expected = 5 + 3 + 1 + 2 + 3 + 2 + 3  # t0 grown to 5, t2-t5, plain, /gone:x
    await eventually(lambda: walked(a) == walked(b) == expected)
    assert a.partition_count() == b.partition_count() == expected
    await b.delete_stream("/gone")
    await eventually(lambda: walked(a) == expected - 3)
    assert a.partition_count() == b.partition_count() == expected - 3
    assert a.partition_walks == b.partition_walks == 1


async def test_topics_created_together_are_written_in_one_transaction_and_seen_by_the_other_broker(pair, monkeypatch):
    """A CreateTopics of a thousand topics wrote each in a transaction of its own (six round trips
    a topic: a broker serving clients created 24-58 topics/s). Created together, any number of
    topics takes the same few statements, and the other broker is told of each one."""
    a, b = pair
    await a.create_stream("/iot")
    await eventually(lambda: b.get_stream("/iot") is not None and b.list_topics("/iot") == [])
    sent = statements_sent(monkeypatch)
    made = await a.create_topics("/iot", [storage.NewTopic(f"d{i}", 1 + i % 3, {"retention.ms": "1000"} if i == 7 else None)
                                          for i in range(200)])
    assert [m.name for m in made] == [f"d{i}" for i in range(200)]
    writes = [q.split(" ", 2)[:2] for q in sent if q.startswith(("INSERT", "SELECT pg_notify"))]
    assert writes == [["INSERT", "INTO"], ["INSERT", "INTO"], ["SELECT", "pg_notify($1,"]], sent  # b's reads may follow
    await eventually(lambda: len(b.list_topics("/iot")) == 200)
    assert b.get_topic("/iot", "d7").configs == {"retention.ms": "1000"} and b.get_topic("/iot", "d8").partitions == 3
    assert a.partition_count() == b.partition_count() == sum(1 + i % 3 for i in range(200))
    part = b.partition("/iot", "d5", 2)
    appended = part.append(batch(2), 2)
    b.writer.flush()
    assert (await asyncio.wait_for(appended, 30)).base_offset == 0
    await eventually(lambda: a.partition("/iot", "d5", 2).high_watermark == 2)


async def test_a_name_another_broker_took_first_refuses_only_that_topic_of_a_batch(pair, monkeypatch):
    """The batch's write fails as a whole when one of its names was taken meanwhile by another
    broker (its insert conflicts): then each topic is written alone, so only that one is refused,
    and the winner's topic is the one listed."""
    a, b = pair
    persist = b._persist_topics
    won: list[storage.TopicInfo] = []

    async def lose_one_name(stream, topics) -> None:
        if not won:
            won.append(await a.create_topic("/default", "taken", 2))
        await persist(stream, topics)

    monkeypatch.setattr(b, "_persist_topics", lose_one_name)
    made = await b.create_topics("/default", [storage.NewTopic("x", 1), storage.NewTopic("taken", 1),
                                              storage.NewTopic("y", 1), storage.NewTopic("x", 1)])
    assert [type(m).__name__ for m in made] == ["TopicInfo", "TopicExistsError", "TopicInfo", "TopicExistsError"]
    assert b.get_topic("/default", "taken") == won[0]
    assert {t.name for t in b.list_topics("/default")} == {"x", "taken", "y"}
    await eventually(lambda: {t.name for t in a.list_topics("/default")} == {"x", "taken", "y"})


async def test_a_retention_pass_looks_at_many_partitions_in_one_statement(pair, monkeypatch):
    """A pass asked three statements of every retained partition: at 100,000 topics, 300,000 round
    trips a minute kept the database (and a steady producer's commits beside it) busy. Now one
    statement looks at thousands of partitions, and only those whose log start moves take one more."""
    a, _ = pair
    now = 1_000 + 3_600_000
    await a.create_topic("/default", "many", 400, {"retention.ms": "60000"})
    await a.create_topic("/default", "capped", 1, {"retention.bytes": "1000", "retention.ms": "-1"})
    for name, index, stamps in (("many", 3, [1_000, now]), ("many", 399, [1_000]), ("many", 7, [now]),
                                ("capped", 0, [1_000] * 8)):  # 479 bytes a batch: the last 3 stay
        part = a.partition("/default", name, index)
        for ts in stamps:
            appended = part.append(batch(2, ts=ts, size=200), 2)
            a.writer.flush()
            await asyncio.wait_for(appended, 30)
    sent = statements_sent(monkeypatch)
    assert await a.enforce_retention(now) == 3
    assert len(sent) <= 10, sent
    starts = {(n, i): a.partition("/default", n, i).log_start_offset for n, i in
              (("many", 3), ("many", 399), ("many", 7), ("many", 0), ("capped", 0))}
    assert starts == {("many", 3): 2, ("many", 399): 2, ("many", 7): 0, ("many", 0): 0, ("capped", 0): 10}
