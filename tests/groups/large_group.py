"""How long a large group takes to form: N aiokafka consumers started at once.

    python -m tests.groups.large_group [N]     # prints the figure against an in-process broker
The test in test_groups_large.py asserts it converges in one rebalance.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

from tests.groups.helpers import HEARTBEAT_MS, REBALANCE_MS, create_topic

SESSION_MS = 10_000  # 50 members in one Python process: leave room for a busy machine


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[set[int]] = []

    async def on_partitions_revoked(self, revoked: object) -> None:
        pass

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.assigned.append({tp.partition for tp in assigned})  # type: ignore[attr-defined]


async def converge(bootstrap: str, topic: str, members: int, timeout: float = 60) -> tuple[float, list[Recorder]]:
    """Start `members` consumers of one group; seconds until every one has its partition."""
    group = f"large-{uuid.uuid4().hex[:8]}"
    consumers = [
        AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS * 3, rebalance_timeout_ms=REBALANCE_MS,
            max_poll_interval_ms=REBALANCE_MS, enable_auto_commit=False,
        )
        for _ in range(members)
    ]
    recorders = [Recorder() for _ in consumers]
    started = time.monotonic()
    try:
        await asyncio.gather(*(c.start() for c in consumers))
        for consumer, recorder in zip(consumers, recorders):
            consumer.subscribe([topic], listener=recorder)
        while not all(r.assigned for r in recorders):
            if time.monotonic() - started > timeout:
                raise AssertionError(f"{sum(1 for r in recorders if r.assigned)}/{members} assigned after {timeout}s")
            # getmany drives nothing here: aiokafka's coordinator task joins in the background
            await asyncio.sleep(0.05)
        took = time.monotonic() - started
        await asyncio.sleep(HEARTBEAT_MS * 3 / 1000 * 2)  # two heartbeats: a second rebalance would show
        return took, recorders
    finally:
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)


def main() -> None:
    from kafkacompat.testing import Broker

    members = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    with Broker(group_initial_rebalance_delay_ms=3000) as broker:  # Kafka's default delay
        topic = f"large-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap_servers, topic, members)
        took, recorders = asyncio.run(converge(broker.bootstrap_servers, topic, members))
        rebalances = max(len(r.assigned) for r in recorders)
        print(f"{members} consumers converged in {took:.2f}s "
              f"(initial rebalance delay 3.0s included), {rebalances} rebalance(s)")


if __name__ == "__main__":
    main()
