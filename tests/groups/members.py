"""Group members driven as users drive them, one thread each, for three client libraries.

Each member subscribes, polls, commits what it consumed (synchronously)
and records what it received and what it is assigned, so tests can wait
on those facts. aiokafka members run their own event loop in their thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from tests.groups.helpers import HEARTBEAT_MS, REBALANCE_MS, SESSION_MS

log = logging.getLogger(__name__)


class Client(Protocol):
    def poll(self) -> list[tuple[int, bytes]]: ...
    def assignment(self) -> set[int]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


class ConfluentClient:
    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        from confluent_kafka import Consumer

        self.revoked: list[set[int]] = []
        self.assigned_calls: list[set[int]] = []
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": REBALANCE_MS,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        conf.update(extra)
        self.consumer = Consumer(conf)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, parts: self.assigned_calls.append({p.partition for p in parts}),
            on_revoke=lambda _c, parts: self.revoked.append({p.partition for p in parts}),
        )
        self._dirty = False

    def poll(self) -> list[tuple[int, bytes]]:
        out = []
        for msg in self.consumer.consume(100, 0.1):
            if msg.error() is None:
                out.append((msg.partition(), msg.value()))
        self._dirty = self._dirty or bool(out)
        return out

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        from confluent_kafka import KafkaException

        if self._dirty:
            try:
                self.consumer.commit(asynchronous=False)
                self._dirty = False
            except KafkaException as exc:
                log.info("commit failed (a rebalance?): %s", exc)

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonClient:
    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        from kafka import KafkaConsumer

        conf = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": REBALANCE_MS,
            "metadata_max_age_ms": 1000,
        }
        conf.update(extra)
        self.consumer = KafkaConsumer(topic, **conf)

    def poll(self) -> list[tuple[int, bytes]]:
        from kafka.errors import KafkaConnectionError

        try:
            batches = self.consumer.poll(timeout_ms=100)
        except KafkaConnectionError:  # kafka-python 3 lets a refused connection out of poll while the broker
            return []                 # restarts (retriable): an application polls again, so the member does
        return [(tp.partition, r.value) for tp, records in batches.items() for r in records]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        from kafka.errors import KafkaError

        try:
            self.consumer.commit()
        except KafkaError as exc:
            log.info("commit failed (a rebalance?): %s", exc)

    def close(self) -> None:
        self.consumer.close()


class AiokafkaClient:
    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        from aiokafka import AIOKafkaConsumer

        self.loop = asyncio.new_event_loop()
        conf = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": REBALANCE_MS,
            "rebalance_timeout_ms": REBALANCE_MS,
            "metadata_max_age_ms": 1000,
        }
        conf.update(extra)

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(topic, **conf)
            await consumer.start()
            return consumer

        self.consumer = self.loop.run_until_complete(start())

    def poll(self) -> list[tuple[int, bytes]]:
        batches = self.loop.run_until_complete(self.consumer.getmany(timeout_ms=100))
        return [(tp.partition, r.value) for tp, records in batches.items() for r in records]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        from aiokafka.errors import KafkaError

        try:
            self.loop.run_until_complete(self.consumer.commit())
        except KafkaError as exc:
            log.info("commit failed (a rebalance?): %s", exc)

    def close(self) -> None:
        self.loop.run_until_complete(self.consumer.stop())
        self.loop.close()


CLIENTS: dict[str, Callable[..., Client]] = {
    "confluent": ConfluentClient,
    "kafka-python": KafkaPythonClient,
    "aiokafka": AiokafkaClient,
}


class Member:
    """One consumer of a group on its own thread."""

    def __init__(self, lib: str, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        self.received: list[tuple[int, bytes]] = []
        self.assigned: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.client: Client | None = None
        self._args = (lib, bootstrap, topic, group, extra)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member {lib}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        lib, bootstrap, topic, group, extra = self._args
        try:
            self.client = client = CLIENTS[lib](bootstrap, topic, group, **extra)
            try:
                while not self._stop.is_set():
                    records = client.poll()
                    self.received.extend(records)
                    if records:
                        client.commit()
                    self.assigned = frozenset(client.assignment())
            finally:
                client.close()
        except BaseException as exc:  # reported by stop() and by tests' waits
            self.error = exc
            log.exception("member failed")

    def stop(self) -> None:
        """Close the consumer as an application does (LeaveGroup, unless static)."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "consumer did not close"
        if self.error is not None:
            raise self.error


def spread(members: list[Member], partitions: int) -> bool:
    """Every member has partitions, none shared, all covered."""
    sets = [m.assigned for m in members]
    return all(sets) and sum(len(s) for s in sets) == partitions and len(frozenset().union(*sets)) == partitions
