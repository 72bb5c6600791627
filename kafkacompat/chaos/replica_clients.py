"""What the replication engine asks each cluster with a stock client: end offsets, a group's cursors, a failover.

Each replica is judged by what a user's librdkafka client sees there, never
by the broker's internals, so these are the only reads the engine makes of
a cluster besides the final read (workload.final_read); a read that cannot be
had answers -1, which the checker reads as "not there".
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .history import History
from .workload import COMMON, GROUP, PARTITIONS

FAILOVER_TIMEOUT = 90.0  # a consumer failing over gets this long to read to the replica's end

Partitions = list[tuple[str, int]]


def every_partition() -> Partitions:
    return [(t, p) for t, n in PARTITIONS.items() for p in range(n)]


def end_offsets(bootstrap: str, tps: Partitions) -> dict[tuple[str, int], int]:
    """Each partition's high watermark on one cluster (-1 where it cannot be had)."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": "chaos-ends"})
    out = {}
    try:
        for topic, partition in tps:
            try:
                out[(topic, partition)] = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                         timeout=10)[1]
            except KafkaException:
                out[(topic, partition)] = -1
    finally:
        consumer.close()
    return out


def committed(bootstrap: str, tps: Partitions) -> dict[tuple[str, int], int]:
    """The group's committed offset of each partition on one cluster (-1: none, or it cannot be had)."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=10)
        return {(tp.topic, tp.partition): tp.offset if tp.error is None and tp.offset >= 0 else -1
                for tp in answer}
    except KafkaException:
        return {tp: -1 for tp in tps}
    finally:
        consumer.close()


def fail_over(bootstrap: str, cluster: str, history: History, partitions: int) -> None:
    """The group's consumer switched to `cluster`'s address, as a user fails over: it reads on from the carried
    cursors (read_committed, librdkafka's default) until every partition reached that cluster's end."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    consumer.subscribe(list(PARTITIONS))
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + FAILOVER_TIMEOUT
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error() is None:
                history.record("failover-read", group=GROUP, cluster=cluster, topic=tp[0], partition=tp[1],
                               offset=msg.offset(), value=msg.value().decode())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(tp)
            elif msg.error().code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                history.record("client-error", role="failover", error=str(msg.error()), fatal=False)
    except KafkaException as exc:
        history.record("client-error", role="failover", error=str(exc.args[0]), fatal=False)
    finally:
        consumer.close()
    history.record("failover-end", group=GROUP, cluster=cluster, complete=len(at_end) == partitions,
                   at_end=sorted(f"{t}/{p}" for t, p in at_end))
