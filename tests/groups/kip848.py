"""A raw KIP-848 member for tests: ConsumerGroupHeartbeat by hand, against any broker.

It plays the client's part of the protocol exactly and instantly: it
adopts whatever assignment an answer carries (revoking at once) and
reports it as owned on its next heartbeat. Tests run the same members
against kafkacompat and Kafka 4.1 and compare what the coordinators say.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from kafkacompat.protocol.messages import make

from tests.groups.helpers import module
from tests.wire import Wire

HEARTBEAT, DESCRIBE, METADATA, FIND_COORDINATOR = 68, 69, 3, 10

# KIP-848 timers for the consumer-protocol tests, the same on kafkacompat and on Kafka 4.1
KIP848_HEARTBEAT_MS, KIP848_SESSION_MS = 500, 3000
KIP848_BROKER = {
    "group_consumer_heartbeat_interval_ms": KIP848_HEARTBEAT_MS,
    "group_consumer_session_timeout_ms": KIP848_SESSION_MS,
    "group_consumer_min_heartbeat_interval_ms": 100,
    "group_consumer_min_session_timeout_ms": 1000,
    "group_initial_rebalance_delay_ms": 0,
}
KIP848_KAFKA = {
    "group.consumer.heartbeat.interval.ms": KIP848_HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": KIP848_SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.migration.policy": "bidirectional",  # Kafka's default, said out loud
}


class RawMember:
    def __init__(
        self, bootstrap: str, group: str, topics: tuple[str, ...] | None = None, regex: str | None = None,
        instance_id: str | None = None, assignor: str | None = None, rebalance_ms: int = 30_000,
        member_id: str | None = None,
    ) -> None:
        self.wire = Wire(bootstrap)
        self.group = group
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_ms = rebalance_ms
        self.member_id = str(uuid.uuid4()) if member_id is None else member_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, set[int]] = {}
        self.last: Any = None

    def close(self) -> None:
        self.wire.close()

    def heartbeat(self, epoch: int | None = None, owned: dict[uuid.UUID, set[int]] | None = None) -> Any:
        """One heartbeat; a join (epoch 0) sends the full subscription. Returns the answer."""
        m = module(HEARTBEAT, 1)
        sent_epoch = self.epoch if epoch is None else epoch
        joining = sent_epoch == 0
        partitions = self.owned if owned is None else owned
        body = make(
            m.ConsumerGroupHeartbeatRequest,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=sent_epoch,
            instance_id=self.instance_id,
            rack_id=None,
            rebalance_timeout=datetime.timedelta(milliseconds=self.rebalance_ms if joining else -1),
            subscribed_topic_names=self.topics if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            topic_partitions=() if joining else tuple(
                make(m.TopicPartitions, topic_id=t, partitions=tuple(sorted(p))) for t, p in sorted(partitions.items())
            ),
        )
        answer = self.wire.request(HEARTBEAT, 1, body)
        self.last = answer
        if answer.error_code == 0 and sent_epoch >= 0:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {tp.topic_id: set(tp.partitions) for tp in answer.assignment.topic_partitions if tp.partitions}
        return answer

    def leave(self, epoch: int = -1) -> Any:
        answer = self.heartbeat(epoch=epoch)
        if answer.error_code == 0:
            self.owned = {}
        return answer

    def named(self, names: dict[uuid.UUID, str]) -> dict[str, list[int]]:
        return {names[t]: sorted(p) for t, p in sorted(self.owned.items(), key=lambda i: names[i[0]]) if p}


def settle(members: list[RawMember], rounds: int = 40) -> int:
    """Heartbeat every member in turn until nothing changes for two rounds; returns the rounds used."""
    quiet = 0
    for used in range(1, rounds + 1):
        before = [(m.epoch, {t: frozenset(p) for t, p in m.owned.items()}) for m in members]
        for member in members:
            answer = member.heartbeat()
            assert answer.error_code == 0, (answer.error_code, answer.error_message)
        after = [(m.epoch, {t: frozenset(p) for t, p in m.owned.items()}) for m in members]
        quiet = quiet + 1 if before == after else 0
        if quiet >= 2:
            return used
    raise AssertionError(f"members did not settle in {rounds} rounds: {[(m.epoch, m.owned) for m in members]}")


def coordinator_ready(bootstrap: str, group: str, timeout: float = 60.0) -> None:
    """Wait until the broker coordinates `group` (Kafka creates __consumer_offsets on first ask)."""
    m = module(FIND_COORDINATOR, 4)
    deadline = time.monotonic() + timeout
    with Wire(bootstrap) as wire:
        while True:
            answer = wire.request(FIND_COORDINATOR, 4, make(m.FindCoordinatorRequest, key_type=0, coordinator_keys=(group,)))
            if answer.coordinators[0].error_code == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no coordinator for {group} within {timeout}s")
            time.sleep(0.2)


def topic_names(wire: Wire, topics: list[str]) -> dict[uuid.UUID, str]:
    """topic id -> name, from Metadata v12."""
    m = module(METADATA, 12)
    body = make(
        m.MetadataRequest,
        topics=tuple(make(m.MetadataRequestTopic, topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer = wire.request(METADATA, 12, body)
    return {t.topic_id: t.name for t in answer.topics}


def describe(wire: Wire, *groups: str) -> Any:
    m = module(DESCRIBE, 1)
    body = make(m.ConsumerGroupDescribeRequest, group_ids=groups, include_authorized_operations=False)
    return wire.request(DESCRIBE, 1, body).groups


def assignment_sets(assignment: Any) -> frozenset[tuple[uuid.UUID, frozenset[int]]]:
    """A described assignment without the order of its lists, which Kafka takes from hash maps."""
    return frozenset((t.topic_id, frozenset(t.partitions)) for t in assignment.topic_partitions if t.partitions)


def targets_are_current(described: Any) -> bool:
    """Every member of a ConsumerGroupDescribe answer holds its target assignment."""
    return all(assignment_sets(d.assignment) == assignment_sets(d.target_assignment) for d in described.members)
