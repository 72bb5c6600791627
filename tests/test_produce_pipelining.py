"""Produce requests on one connection: batches keep their order, answers come in request order.

A connection may have several produce requests in flight (librdkafka and
the Java producer keep up to five). On the cloud engine the broker places
a request's batches at once and goes on to the next request while the
object is written, so requests sent together share one object and one
database commit; the answers still come back in request order.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch

from kafkacompat.testing import Broker
from tests.cloud_engine import on_the_cloud_engine
from tests.wire import Wire

PRODUCE_V = 9


def produce_request(topic: str, parts: list[tuple[int, bytes]], acks: int = -1) -> object:
    """One Produce request; `parts` may name a partition more than once."""
    import kio.schema.produce.v9.request as m

    return make(m.ProduceRequest, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=30),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=tuple(
                    make(m.PartitionProduceData, index=index, records=records) for index, records in parts)),))


def batch(*values: bytes) -> bytes:
    return build_batch([Record(None, value, [], 1000) for value in values])


@pytest.fixture(params=["memory", "disk", "cloud"])
def broker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    if request.param == "cloud":
        on_the_cloud_engine(monkeypatch)
    with Broker("tmp" if request.param == "disk" else None) as running:
        yield running


def init_producer_id(wire: Wire) -> int:
    import kio.schema.init_producer_id.v4.request as m

    answer = wire.request(22, 4, make(m.InitProducerIdRequest, transactional_id=None,
                                      transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                                      producer_epoch=-1))
    return int(answer.producer_id)


def test_a_partition_named_twice_in_one_request_keeps_its_batches_in_order(broker: Broker) -> None:
    topic = broker.create_topic("twice", 2)
    parts = [(0, batch(b"a1", b"a2")), (1, batch(b"x")), (0, batch(b"b1")), (0, batch(b"c1", b"c2", b"c3"))]
    with Wire(broker.bootstrap_servers) as wire:
        answer = wire.request(0, PRODUCE_V, produce_request(topic, parts))
    results = [(p.index, p.error_code.value, p.base_offset) for p in answer.responses[0].partition_responses]
    assert results == [(0, 0, 0), (1, 0, 0), (0, 0, 2), (0, 0, 3)]
    got = broker.consume(topic, partition=0, count=6)
    assert [(m.offset, m.value) for m in got] == list(enumerate([b"a1", b"a2", b"b1", b"c1", b"c2", b"c3"]))


def test_requests_in_flight_on_one_connection_share_an_object_and_answer_in_order(monkeypatch) -> None:
    on_the_cloud_engine(monkeypatch)
    # a long flush window: every request sent below reaches the broker inside it
    with Broker(store_flush_ms=300) as broker:
        topic = broker.create_topic("pipelined", 2)
        writer = broker.server.store.writer
        objects_before = writer.flushes
        sent = []
        with Wire(broker.bootstrap_servers, timeout=30) as wire:
            for i in range(6):
                sent.append(wire.send(0, PRODUCE_V, produce_request(topic, [(i % 2, batch(f"m{i}".encode()))])))
            answers = [wire.receive(0, PRODUCE_V) for _ in sent]
        assert [correlation for correlation, _ in answers] == sent  # in request order
        offsets = [(a.responses[0].partition_responses[0].error_code.value,
                    a.responses[0].partition_responses[0].base_offset) for _, a in answers]
        assert offsets == [(0, 0), (0, 0), (0, 1), (0, 1), (0, 2), (0, 2)]
        assert writer.flushes - objects_before <= 2  # requests in flight together share objects (one each before)
        for partition in (0, 1):
            got = broker.consume(topic, partition=partition, count=3)
            assert [m.value for m in got] == [f"m{i}".encode() for i in range(partition, 6, 2)]


def test_an_idempotent_producers_batches_in_flight_keep_their_sequence(broker: Broker) -> None:
    """Sequences 0, 1, 2 sent without waiting (two in one request for one partition) are all
    accepted in order; a retry of the first is answered with its original offset."""
    topic = broker.create_topic("idem", 1)

    def seq_batch(sequence: int, pid: int) -> bytes:
        return build_batch([Record(None, f"s{sequence}".encode(), [], 1000)], producer_id=pid, producer_epoch=0,
                           base_sequence=sequence)

    with Wire(broker.bootstrap_servers, timeout=30) as wire:
        pid = init_producer_id(wire)
        first = wire.send(0, PRODUCE_V, produce_request(topic, [(0, seq_batch(0, pid)), (0, seq_batch(1, pid))]))
        second = wire.send(0, PRODUCE_V, produce_request(topic, [(0, seq_batch(2, pid))]))
        retry = wire.send(0, PRODUCE_V, produce_request(topic, [(0, seq_batch(0, pid))]))
        answers = [wire.receive(0, PRODUCE_V) for _ in range(3)]
    assert [c for c, _ in answers] == [first, second, retry]
    results = [[(p.error_code.value, p.base_offset) for p in a.responses[0].partition_responses] for _, a in answers]
    assert results == [[(0, 0), (0, 1)], [(0, 2)], [(0, 0)]]
    assert [m.value for m in broker.consume(topic, partition=0, count=3)] == [b"s0", b"s1", b"s2"]
