"""OffsetFetch finds each named partition's cursor by its key (issue 32).

A group committing for many topics of one stream keeps every cursor in that
stream's cursor table. OffsetFetch looked up each topic it was asked for by
scanning all of the group's cursors there, so fetching a group's 10,000
cursors 1,000 at a time cost 10,000 x 10,000 looks (`bench scale --streams 1
--cursors 1000000` spent minutes in it). Here a stock client commits and
reads back through a real broker, and the store's scan is counted.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacompat.testing import Broker


def test_offset_fetch_of_named_partitions_scans_no_group_cursor_table() -> None:
    with Broker(data_dir="tmp") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        names = [f"t{i}" for i in range(50)]
        for future in admin.create_topics([NewTopic(n, 2, 1) for n in names]).values():
            future.result(timeout=30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "many",
                             "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(n, 0, 10 + i) for i, n in enumerate(names)], asynchronous=False)
            store = broker.server.store
            scans = []
            get_cursors = store.get_cursors

            def counted(stream: str, group: str):
                scans.append((stream, group))
                return get_cursors(stream, group)

            store.get_cursors = counted
            asked = [TopicPartition(n, p) for n in names[:20] for p in (0, 1)]
            got = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(asked, timeout=30)}
        finally:
            consumer.close()
    assert got == {**{(n, 0): 10 + i for i, n in enumerate(names[:20])},
                   **{(n, 1): -1001 for n in names[:20]}}  # partition 1: nothing committed (OFFSET_INVALID)
    assert scans == [], f"OffsetFetch scanned the group's cursors {len(scans)} times"
