"""DescribeTopicPartitions for all topics, paged to the end with its cursor (issue 32).

Java's admin client (and so kafka-topics --describe) lists a large cluster page by page. Each
page used to list, authorize and sort every topic: paging to the end cost pages x topics (65 s
at 100,000 topics). What a client sees is checked here: every topic and partition exactly once,
in name order, across pages that split topics, with topics coming and going between pages; and
that the order is built once, not once per page (the work, not the wall clock: the figures are
`kafkacompat bench scale`'s).
"""

from __future__ import annotations

import datetime

import kio.schema.create_topics.v7.request as create_v7
import kio.schema.describe_topic_partitions.v0.request as dtp_v0
import pytest
from kafkacompat.protocol.messages import make

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from tests.wire import Wire

TOPICS = {f"p-{i:03d}": i % 3 + 1 for i in range(60)}  # 120 partitions, topics of 1 to 3


def _create(wire: Wire, topics: dict[str, int]) -> None:
    request = make(create_v7.CreateTopicsRequest, topics=tuple(
        make(create_v7.CreatableTopic, name=name, num_partitions=count, replication_factor=-1, assignments=(),
             configs=()) for name, count in topics.items()), timeout=datetime.timedelta(seconds=30), validate_only=False)
    assert {t.error_code for t in wire.request(19, 7, request).topics} == {0}


def _page(wire: Wire, limit: int, cursor: tuple[str, int] | None) -> tuple[list[tuple[str, int]], tuple | None]:
    """(topic, partition) of one page of every topic, and the next cursor."""
    answer = wire.request(75, 0, make(dtp_v0.DescribeTopicPartitionsRequest, topics=(), response_partition_limit=limit,
                                      cursor=cursor and make(dtp_v0.Cursor, topic_name=cursor[0],
                                                             partition_index=cursor[1])))
    assert {t.error_code for t in answer.topics} <= {0}
    nxt = answer.next_cursor
    return ([(t.name, p.partition_index) for t in answer.topics for p in t.partitions],
            nxt and (nxt.topic_name, nxt.partition_index))


def _walk(wire: Wire, limit: int, between=lambda page: None) -> list[list[tuple[str, int]]]:
    pages, cursor = [], None
    while True:
        page, cursor = _page(wire, limit, cursor)
        pages.append(page)
        if cursor is None:
            return pages
        between(len(pages))
        assert len(pages) < 1000, "the cursor does not move on"


def _expected(topics: dict[str, int]) -> list[tuple[str, int]]:
    return [(name, i) for name in sorted(topics) for i in range(topics[name])]


def test_paging_to_the_end_returns_every_partition_once_in_name_order() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        _create(wire, TOPICS)
        for limit in (1, 7, 2000):
            pages = _walk(wire, limit)
            assert [tp for page in pages for tp in page] == _expected(TOPICS), limit
            assert all(len(page) == limit for page in pages[:-1]), limit  # full pages, topics split between them
            assert len(pages) == -(-120 // limit)


def test_pages_of_a_thousand_topics_and_more_are_whole() -> None:
    many = {f"m-{i:04d}": 1 for i in range(1200)}  # answers this big are encoded in slices
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        _create(wire, many)
        for limit, pages in ((2000, 1), (1100, 2)):
            walked = _walk(wire, limit)
            assert len(walked) == pages and [tp for page in walked for tp in page] == _expected(many), limit


def test_topics_created_and_deleted_between_pages_are_listed_as_they_are_then() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        _create(wire, TOPICS)

        def change(pages: int) -> None:
            if pages == 2:  # the cursor is at p-004 by now (7 partitions a page)
                broker.delete_topic("p-050")
                _create(wire, {"p-000x": 2, "p-050x": 2})  # one behind the cursor, one ahead of it

        seen = [tp for page in _walk(wire, 7, change) for tp in page]
        now = {name: count for name, count in TOPICS.items() if name != "p-050"} | {"p-050x": 2}
        assert seen == _expected(now)


def test_the_name_order_is_built_once_for_every_page() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        _create(wire, TOPICS)
        store = broker.server.cluster.store
        listed = []
        real = store.list_topics
        store.list_topics = lambda stream=None: listed.append(stream) or real(stream)
        try:
            pages = _walk(wire, 4)
        finally:
            del store.list_topics
        assert len(pages) == 30 and len(listed) <= 1, f"every topic listed {len(listed)} times for {len(pages)} pages"


@pytest.mark.slow
def test_kafka_topics_describe_pages_through_every_topic() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        _create(wire, TOPICS)
        done = run_tool("kafka-topics", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                        "--partition-size-limit-per-response", "7")
        assert done.returncode == 0, done.stderr
        shown = [(fields["Topic"], int(fields["Partition"])) for fields in (
            dict(field.split(": ", 1) for field in line.strip().split("\t") if ": " in field)
            for line in done.stdout.splitlines()) if "Partition" in fields]
        assert sorted(shown) == _expected(TOPICS)  # each once (the tool prints them in an order of its own)
