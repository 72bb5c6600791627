"""How long a big group takes to converge, and in how many rebalances.

Used by test_many_members.py; also runnable to print the figure:

    python -m tests.groups.converge [members] [initial delay ms]
"""

from __future__ import annotations

import sys
import threading
import time
import uuid

from confluent_kafka import Consumer

from kafkacompat.testing import Broker
from tests.conftest import create_topic


def converge(broker: Broker, members: int, timeout: float = 60) -> dict[str, object]:
    """Start `members` consumers on a topic with as many partitions; wait until each owns one."""
    topic = f"t-{uuid.uuid4().hex[:10]}"
    group = f"g-{topic}"
    create_topic(broker.bootstrap_servers, topic, members)
    assigned: list[list[int]] = [[] for _ in range(members)]
    revoked = [0] * members
    lock = threading.Lock()
    consumers = []

    def callbacks(i: int) -> dict[str, object]:
        def on_assign(_c: object, parts: list) -> None:
            with lock:
                assigned[i].append(len(parts))

        def on_revoke(_c: object, parts: list) -> None:
            with lock:
                revoked[i] += 1

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    start = time.monotonic()
    try:
        for i in range(members):
            consumer = Consumer({
                "bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            })
            consumer.subscribe([topic], **callbacks(i))
            consumers.append(consumer)
            consumer.poll(0)
        while not all(a and a[-1] == 1 for a in assigned):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{members} members did not converge within {timeout}s: {assigned}")
            for consumer in consumers:
                consumer.poll(0.01)
        took = time.monotonic() - start
        group_state = broker.server.cluster.groups.groups.get(group)
        return {
            "members": members,
            "seconds": took,
            "assign_callbacks": sum(len(a) for a in assigned),
            "revoke_callbacks": sum(revoked),
            "generation": group_state.generation if group_state else None,
        }
    finally:
        for consumer in consumers:
            consumer.close()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    delay = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    with Broker(group_initial_rebalance_delay_ms=delay) as running:
        print(converge(running, count))
