"""Idempotent producing: retries dedupe, gaps and stale epochs are refused."""

from __future__ import annotations

import datetime

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.catalog.producer_state import INT32_MAX, last_sequence
from kafkacompat.testing import Broker
from tests.test_bad_input import produce_request
from tests.wire import Wire, request_class


def init_producer_id(wire: Wire) -> int:
    request = make(request_class(22, 4), transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                   producer_id=-1, producer_epoch=-1)
    response = wire.request(22, 4, request)
    assert response.error_code == ErrorCode.none and response.producer_epoch == 0
    return response.producer_id


def send(wire: Wire, topic: str, pid: int, seq: int, count: int = 2, epoch: int = 0):
    batch = build_batch([Record(None, b"s%d" % (seq + i), [], 1) for i in range(count)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    response = wire.request(0, 9, produce_request(topic, batch, acks=-1))
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_retry_inside_the_window_returns_the_original_offsets(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        pid = init_producer_id(wire)
        offsets = [send(wire, topic, pid, seq) for seq in range(0, 12, 2)]
        assert offsets == [(ErrorCode.none, o) for o in range(0, 12, 2)]
        # the last five batches are remembered: a retry gets the first answer again
        assert send(wire, topic, pid, 4) == (ErrorCode.none, 4)
        assert send(wire, topic, pid, 10) == (ErrorCode.none, 10)
        # a gap is refused, and nothing is written
        assert send(wire, topic, pid, 20)[0] == ErrorCode.out_of_order_sequence_number
        assert send(wire, topic, pid, 12) == (ErrorCode.none, 12)


def test_a_new_epoch_must_start_at_zero_and_fences_the_old(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        pid = init_producer_id(wire)
        assert send(wire, topic, pid, 0, epoch=0) == (ErrorCode.none, 0)
        assert send(wire, topic, pid, 5, epoch=1)[0] == ErrorCode.out_of_order_sequence_number
        assert send(wire, topic, pid, 0, epoch=1) == (ErrorCode.none, 2)
        assert send(wire, topic, pid, 2, epoch=0)[0] == ErrorCode.invalid_producer_epoch


def test_sequences_wrap_at_int32_max(broker: Broker, topic: str) -> None:
    assert last_sequence(INT32_MAX - 1, 4) == 1
    with Wire(broker.bootstrap_servers) as wire:
        pid = init_producer_id(wire)
        assert send(wire, topic, pid, INT32_MAX - 3, count=2) == (ErrorCode.none, 0)  # no state: any start
        assert send(wire, topic, pid, INT32_MAX - 1, count=4) == (ErrorCode.none, 2)  # ..., MAX, 0, 1
        assert send(wire, topic, pid, 2, count=2) == (ErrorCode.none, 6)
        assert send(wire, topic, pid, INT32_MAX - 1, count=4) == (ErrorCode.none, 2)  # a retry across the wrap


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_refused_with_unsupported_version(broker: Broker, topic: str, version: int) -> None:
    import struct

    records = build_batch([Record(None, b"old", [], 1)])
    name = topic.encode()
    body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(records)) + records
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(0, version, body)
        frame = wire.read_frame()
    pos = 4 + 4  # correlation id, topic count
    (length,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + length + 4
    index, error = struct.unpack_from(">ih", frame, pos)
    assert (index, error) == (0, ErrorCode.unsupported_version.value)


def test_a_retry_across_a_restart_gets_its_original_offsets(tmp_path) -> None:
    from tests.conftest import create_topic

    data = str(tmp_path / "data")
    with Broker(data_dir=data) as first:
        port = first.port
        create_topic(first.bootstrap_servers, "retried")
        with Wire(first.bootstrap_servers) as wire:
            pid = init_producer_id(wire)
            assert [send(wire, "retried", pid, seq) for seq in (0, 2, 4)] == [(ErrorCode.none, o) for o in (0, 2, 4)]
    with Broker(data_dir=data, port=port) as second:
        with Wire(second.bootstrap_servers) as wire:
            # the answer to seq 4 was "lost": the producer retries it after the restart
            assert send(wire, "retried", pid, 4) == (ErrorCode.none, 4)
            assert send(wire, "retried", pid, 8)[0] == ErrorCode.out_of_order_sequence_number
            assert send(wire, "retried", pid, 6) == (ErrorCode.none, 6)


def test_idle_producers_expire_like_kafkas_producer_id_expiration() -> None:
    from kafkacompat.catalog.producer_state import ProducerStates

    now = [1000.0]
    states = ProducerStates(expiration_ms=60_000, clock=lambda: now[0])
    states.record(7, 0, "p", 0, 2, 0, -1)
    assert states.check(7, 0, "p", 0, 2).duplicate_of == 0
    now[0] += 30
    states.record(8, 0, "p", 0, 1, 2, -1)  # another producer keeps writing
    now[0] += 45  # producer 7 has been idle 75 s, producer 8 for 45 s
    states.record(8, 0, "p", 1, 1, 3, -1)
    assert len(states) == 1
    # a forgotten producer is one the broker has no state for: any sequence is accepted
    assert states.check(7, 0, "p", 0, 2).duplicate_of is None
    assert states.check(8, 0, "p", 1, 1).duplicate_of == 3


def test_batches_pipelined_behind_a_refused_one_are_refused_alike_not_as_a_gap() -> None:
    """librdkafka answers OUT_OF_ORDER_SEQUENCE_NUMBER on a batch that is not its first in flight by
    bumping its epoch and resending, under new sequence numbers, what it could not tell was stored
    (librdkafka issue 4953): a batch pipelined behind a refused one gets the refusal's error instead."""
    from kafkacompat.catalog.producer_state import WINDOW, ProducerStates

    now = [1000.0]
    states = ProducerStates(clock=lambda: now[0])
    states.record(7, 0, "p", 0, 2, 0, -1)
    states.refused(7, 0, "p", 2, ErrorCode.not_leader_or_follower)
    states.refused(7, 0, "p", 4, ErrorCode.kafka_storage_error)  # a follower refused too: the first is kept
    followers = [states.check(7, 0, "p", seq, 2).error for seq in (4, 6, 8, 10, 12)]
    assert followers == [ErrorCode.not_leader_or_follower] * (WINDOW - 1) + [ErrorCode.out_of_order_sequence_number]
    assert states.check(7, 0, "p", 0, 2).duplicate_of == 0  # a retry from before it: as ever
    assert states.check(7, 1, "p", 4, 2).error == ErrorCode.out_of_order_sequence_number  # another epoch

    states.refused(7, 0, "p", 2, ErrorCode.not_leader_or_follower)  # the resent batch refused again
    assert states.check(7, 0, "p", 4, 2).error == ErrorCode.not_leader_or_follower
    resent = states.check(7, 0, "p", 2, 2)  # resent in order: taken
    assert (resent.error, resent.duplicate_of) == (ErrorCode.none, None)
    states.record(7, 0, "p", 2, 2, 2, -1)
    assert states.check(7, 0, "p", 6, 2).error == ErrorCode.out_of_order_sequence_number  # a real gap again

    # a broker that has no state for the producer (it just became the leader) refuses followers too
    states.refused(9, 0, "q", 10, ErrorCode.not_leader_or_follower)
    assert states.check(9, 0, "q", 12, 2).error == ErrorCode.not_leader_or_follower
    now[0] += 31  # but not for long: pipelined batches arrive within moments
    assert states.check(9, 0, "q", 12, 2).error == ErrorCode.none
    states.refused(9, 0, "q", 10, ErrorCode.invalid_record)  # a refusal not followed by a resend
    assert states.check(9, 0, "q", 12, 2).error == ErrorCode.none


async def test_concurrent_producers_wait_for_one_rebuild_of_the_window() -> None:
    """Producer state is rebuilt from the log when a partition is first used (after a restart, or on
    becoming its leader); a second producer's batch judged against a half-read window would be stored
    again if it is a retry."""
    import asyncio

    from kafkacompat.storage.memory import MemoryStore

    from kafkacompat.catalog.producer_state import ProducerStates

    store = MemoryStore()
    await store.open()
    await store.create_topic(store.default_stream, "t", 1)
    partition = store.partition(store.default_stream, "t", 0)
    for pid in (7, 8):
        data = build_batch([Record(None, b"x", [], 1)], producer_id=pid, producer_epoch=0, base_sequence=0)
        await partition.append(data, 1)

    release = asyncio.Event()
    reads = []

    class Slow:  # the log read of the first rebuild is held until the second producer has asked
        def __getattr__(self, name: str):
            return getattr(partition, name)

        async def read(self, offset: int, max_bytes: int):
            reads.append(offset)
            await release.wait()
            return await partition.read(offset, max_bytes)

    states = ProducerStates()
    first = asyncio.create_task(states.restore("p", Slow()))
    await asyncio.sleep(0)
    second = asyncio.create_task(states.restore("p", Slow()))
    await asyncio.sleep(0.05)
    assert not second.done()  # it waits for the rebuild under way
    release.set()
    await asyncio.gather(first, second)
    assert reads == [0]  # read once
    assert states.check(8, 0, "p", 0, 1).duplicate_of == 1
    await store.close()


async def test_a_batch_behind_one_whose_write_failed_is_not_taken_before_that_failure_is_recorded() -> None:
    """The cloud engine's writer fails a write's batches and at once takes the partition's next
    appends unchained (a producer's resend must not be refused for the same failure). A batch
    pipelined behind the failed one, judged before the failure reached the producer's window, was
    taken and stored after a batch that was not: the window, cut back to before the failed batch,
    then refused the producer's next batch as a gap (OUT_OF_ORDER_SEQUENCE_NUMBER), after which
    librdkafka bumps its epoch and resends under new sequence numbers what it could not tell was
    stored (issue 28: idempotent duplicates under an object store outage). It waits for the failure
    instead, and is then answered as the failed batch was."""
    import asyncio

    from kafkacompat.storage import StorageUnavailableError

    from kafkacompat.catalog.producer_state import ProducerStates

    states = ProducerStates()
    states.record(7, 0, "p", 0, 2, 0, -1)
    store: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    failed = states.appending(7, 0, "p", 2, 2, -1, store)
    store.set_exception(StorageUnavailableError("writing the object failed"))  # its producer not told yet

    behind = states.check(7, 0, "p", 4, 2)
    assert behind.in_flight is not None, "taken behind a batch whose write had failed"
    states.refused(7, 0, "p", 2, ErrorCode.kafka_storage_error)  # as the produce handler records the failure
    states.not_written(7, "p", failed)
    assert await behind.in_flight is False
    assert states.check(7, 0, "p", 4, 2).error == ErrorCode.kafka_storage_error  # answered as the failed one
    assert states.check(7, 0, "p", 2, 2).error == ErrorCode.none  # and the resend, in order, is taken


def test_a_window_emptied_by_failed_writes_still_refuses_a_gap() -> None:
    """A producer pipelines five batches (max.in.flight); the write of the first fails, and the batches
    behind it leave the window with it. The window held only those five: any sequence was then taken.
    In the 60-minute cloud run (issue 28) a restarted leader refused the resend of the first at once
    (not serving yet), took the second, pipelined behind it, and stored it: librdkafka, told a later
    batch was stored, reported the first delivered (offset unknown) though it never was. The next
    batch must follow the last one stored, and one pipelined behind a refused batch is answered alike."""
    import asyncio

    from kafkacompat.catalog.producer_state import WINDOW, ProducerStates

    async def emptied(states: ProducerStates, pid: int, first: int) -> None:
        loop = asyncio.get_running_loop()
        in_flight = [states.appending(pid, 0, "p", first + 2 * i, 2, -1, loop.create_future()) for i in range(WINDOW)]
        states.not_written(pid, "p", in_flight[0])  # and every batch behind it

    async def scenario() -> None:
        states = ProducerStates()
        for i in range(WINDOW):
            states.record(7, 0, "p", 2 * i, 2, 2 * i, -1)
        await emptied(states, 7, 2 * WINDOW)
        assert states.check(7, 0, "p", 2 * WINDOW + 2, 2).error == ErrorCode.out_of_order_sequence_number
        states.refused(7, 0, "p", 2 * WINDOW, ErrorCode.not_leader_or_follower)  # the resend, at the door
        assert states.check(7, 0, "p", 2 * WINDOW + 2, 2).error == ErrorCode.not_leader_or_follower
        assert states.check(7, 0, "p", 2 * WINDOW, 2).error == ErrorCode.none  # resent in order: taken

        await emptied(states, 8, 40)  # a producer this broker had no state for: its first batch was taken as is
        states.refused(8, 0, "p", 40, ErrorCode.not_leader_or_follower)
        assert states.check(8, 0, "p", 42, 2).error == ErrorCode.not_leader_or_follower

    asyncio.run(scenario())


async def test_the_window_rebuilt_from_the_log_knows_an_aborted_transaction_ended_it() -> None:
    """After a restart (or on becoming the leader) the window is rebuilt from the log's tail: an abort
    marker there lets the next batch take the aborted batches' sequences, as it did before."""
    from kafkacompat.protocol.control_records import ControlType, build_marker, set_attributes
    from kafkacompat.protocol.records import ATTR_TRANSACTIONAL
    from kafkacompat.storage.memory import MemoryStore

    from kafkacompat.catalog.producer_state import ACCEPT, ProducerStates

    store = MemoryStore()
    await store.open()
    await store.create_topic(store.default_stream, "t", 1)
    partition = store.partition(store.default_stream, "t", 0)
    for seq in (0, 1):
        batch = build_batch([Record(None, b"x", [], 1)], producer_id=7, producer_epoch=0, base_sequence=seq)
        await partition.append(set_attributes(batch, ATTR_TRANSACTIONAL), 1)
        await partition.append(build_marker(7, 0, ControlType.COMMIT if seq == 0 else ControlType.ABORT, 1, 0), 1)
    states = ProducerStates()
    await states.restore("p", partition)
    assert states.check(7, 0, "p", 1, 1) == ACCEPT  # taken, not answered as a duplicate
    assert states.active("p")[0][2] == 1  # DescribeProducers still shows the last sequence written
    await store.close()


def test_after_an_abort_the_next_batch_may_reuse_an_aborted_sequence_but_not_skip_ahead() -> None:
    """The first batch after an aborted transaction may take the sequence of a batch librdkafka purged
    (stored or not), never one past the last stored; and one pipelined behind it, when it is refused at
    the door (its transaction not admitted yet), is answered alike: taken, it was stored ahead of it,
    and librdkafka reported the refused one delivered with no offset (the 60-minute cloud run)."""
    from kafkacompat.catalog.producer_state import ProducerStates

    states = ProducerStates()
    states.record(7, 0, "p", 0, 1, 0, -1)  # committed
    states.record(7, 0, "p", 1, 1, 2, -1)  # then aborted
    states.end_marker(7, 0, "p", aborted=True)
    assert states.check(7, 0, "p", 3, 1).error == ErrorCode.out_of_order_sequence_number
    assert [states.check(7, 0, "p", seq, 1).error for seq in (1, 2)] == [ErrorCode.none] * 2
    states.refused(7, 0, "p", 1, ErrorCode.not_enough_replicas)
    assert states.check(7, 0, "p", 2, 1).error == ErrorCode.not_enough_replicas
    assert states.check(7, 0, "p", 1, 1).error == ErrorCode.none
