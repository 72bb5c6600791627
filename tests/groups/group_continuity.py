"""A stable group of two librdkafka members under producer load, through a disruption of its coordinator.

`keep_group_through` runs the scenario; `disrupt` kills or restarts the
group's coordinator and returns a bootstrap list that still answers. As on
Kafka, whose coordinator replays group state from __consumer_offsets, the
members must keep their partitions (no revocation, no new assignment),
read every record, none twice, and find their commits where they left them.
Used with one broker restarted (tests/groups) and with a cluster's
coordinator killed (tests/cluster).
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6


def wait_until(what: str, check: Callable[[], object], timeout: float, state: Callable[[], object] = str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} {state()}")
        time.sleep(0.1)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, as a consumer outside the group reads them (OffsetFetch)."""
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        check.close()
    return {tp.partition: tp.offset for tp in found}


class Member(threading.Thread):
    """One consumer polling in its own thread, committing what it read after every batch."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        super().__init__(daemon=True)
        settings = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                    "auto.offset.reset": "earliest"}
        if protocol == "consumer":
            settings["group.protocol"] = "consumer"
        else:
            settings.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 500,
                             "partition.assignment.strategy": "range"})
        self.consumer = Consumer(settings)
        self.topic = topic
        self.records: list[tuple[int, int, bytes]] = []
        self.assigned: set[int] = set()
        self.rebalances: list[tuple[str, float, list[int]]] = []  # (assign|revoke, when, partitions)
        self.commit_errors: list[str] = []
        self.uncommitted = False
        self.halt = threading.Event()

    def stop(self) -> None:
        self.halt.set()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances.append(("assign", time.monotonic(), sorted(p.partition for p in partitions)))
        self.assigned |= {p.partition for p in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances.append(("revoke", time.monotonic(), sorted(p.partition for p in partitions)))
        self.assigned -= {p.partition for p in partitions}

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.halt.is_set():
            batch = [m for m in self.consumer.consume(200, timeout=0.2) if m.error() is None]
            self.records += [(m.partition(), m.offset(), m.value()) for m in batch]
            if batch or self.uncommitted:
                self._commit()
        self.consumer.close()

    def _commit(self) -> None:
        try:
            self.consumer.commit(asynchronous=False)
            self.uncommitted = False
        except KafkaException as exc:  # NOT_COORDINATOR while the group moves: tried again at the next poll
            self.uncommitted = exc.args[0].code() != KafkaError._NO_OFFSET
            self.commit_errors.append(str(exc))


class JavaMember(threading.Thread):
    """The same member written with Java kafka-clients (compat_tests/java/GroupMember.java), followed
    through the lines it prints; closing its stdin stops it."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        from compat_tests.drivers.java import java_command

        super().__init__(daemon=True)
        self.process = subprocess.Popen([*java_command("GroupMember"), bootstrap, topic, group, protocol],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)
        self.records: list[tuple[int, int, bytes]] = []
        self.assigned: set[int] = set()
        self.rebalances: list[tuple[str, float, list[int]]] = []
        self.commit_errors: list[str] = []
        self.uncommitted = False

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind in ("assign", "revoke"):
                parts = [int(p) for p in rest.split(",") if p]
                self.rebalances.append((kind, time.monotonic(), parts))
                if kind == "assign":
                    self.assigned |= set(parts)
                else:
                    self.assigned -= set(parts)
            elif kind == "record":
                partition, offset, value = rest.split(" ", 2)
                self.records.append((int(partition), int(offset), value.encode()))
                self.uncommitted = True
            elif kind == "committed":
                self.uncommitted = False
            elif kind == "commit-error":
                self.commit_errors.append(rest)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        super().join(timeout)


CLIENTS = {"confluent": Member, "java": JavaMember}


@dataclass(frozen=True)
class Outcome:
    records: int  # delivered, none read twice
    resumed_after_s: float  # from the disruption until both members read again
    commit_errors: int  # commits refused while the group moved (retried)
    stored_twice: int  # values the producer's retries stored at two offsets


def keep_group_through(bootstrap: str, protocol: str, disrupt: Callable[[int], str],
                       client: str = "confluent") -> Outcome:
    """Run the scenario with members of `client` (a key of CLIENTS); `disrupt(coordinator id)`
    returns where the brokers still answer."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=10)[topic].result(timeout=20)

    produced: list[bytes] = []
    ends: dict[int, int] = {}  # partition -> next offset, as the producer was told
    stop_producing = threading.Event()

    def delivered(msg: object) -> None:
        produced.append(msg.value())
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    def progress() -> str:
        """Per member: partition -> next offset it would read, against what was produced."""
        read = [{p: max(o for q, o, _ in m.records if q == p) + 1 for p in {q for q, _, _ in m.records}} for m in members]
        return f"(produced up to {dict(sorted(ends.items()))}, read up to {read}, holding {[m.assigned for m in members]})"

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 20})
        i = 0
        while not stop_producing.is_set() or i < 600:
            value = str(i).encode()
            producer.produce(topic, value=value, on_delivery=lambda err, msg: err is None and delivered(msg))
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        assert producer.flush(60) == 0

    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    members = [CLIENTS[client](bootstrap, group, topic, protocol) for _ in range(2)]
    for member in members:
        member.start()
    try:
        wait_until("both members to hold partitions, together all of them", lambda: all(m.assigned for m in members)
                   and set().union(*(m.assigned for m in members)) == set(range(PARTITIONS))
                   and sum(len(m.assigned) for m in members) == PARTITIONS, 60)
        settled = [(list(m.rebalances), set(m.assigned)) for m in members]
        wait_until("records to flow to both members", lambda: all(len(m.records) > 50 for m in members), 60)
        assert [(list(m.rebalances), set(m.assigned)) for m in members] == settled, "the group was not stable"

        coordinator = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20).coordinator.id
        committed_before = committed(bootstrap, group, topic)
        read_before = [len(m.records) for m in members]
        killed_at = time.monotonic()
        remaining = disrupt(coordinator)

        wait_until("both members to read again after the disruption",
                   lambda: all(len(m.records) > n + 50 for m, n in zip(members, read_before)), 90)
        resumed_after = time.monotonic() - killed_at
        stop_producing.set()
        producing.join(90)
        assert not producing.is_alive()
        everything = set(produced)
        wait_until("every produced record to be read",
                   lambda: {v for m in members for _, _, v in m.records} >= everything, 90, progress)
        wait_until("the members' last commits", lambda: not any(m.uncommitted for m in members), 30)
        ended = [(list(m.rebalances), set(m.assigned)) for m in members]  # close() revokes: taken before
    finally:
        stop_producing.set()
        for member in members:
            member.stop()
        for member in members:
            member.join(30)

    for (rebalances, assigned), (now, holding) in zip(settled, ended):
        assert now == rebalances, f"a rebalance after the disruption: {now[len(rebalances):]}"
        assert holding == assigned
    records = [r for m in members for r in m.records]
    positions = [(p, o) for p, o, _ in records]
    assert len(positions) == len(set(positions)), "a member read a record again"
    values = [v for _, _, v in records]
    assert set(values) == set(produced), "a record was skipped"
    by_partition: dict[int, list[int]] = {}
    for partition, offset, _ in records:
        by_partition.setdefault(partition, []).append(offset)
    for partition, offsets in by_partition.items():
        offsets.sort()  # a partition may have moved between the members while the group formed
        gaps = [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1]
        assert not gaps, f"partition {partition}: offsets jump {gaps[:5]}"
        assert offsets[0] == 0

    committed_after = committed(remaining, group, topic)
    read_ends = {p: max(offs) + 1 for p, offs in by_partition.items()}
    assert read_ends == ends, "the members did not read up to the end of every partition"
    assert all(committed_after[p] >= committed_before[p] for p in committed_before), (committed_before, committed_after)
    assert committed_after == ends, "the members' last commits are not what they read"
    # the same value at two offsets is the producer's retry stored twice (the produce path's
    # concern, not the group's): counted, not failed on here
    return Outcome(len(values), resumed_after, sum(len(m.commit_errors) for m in members),
                   len(values) - len(set(values)))
