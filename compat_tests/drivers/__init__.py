"""One driver per client family, all answering the same questions.

A driver runs a stock client the way a user would and reports what the
user saw; the scenarios in test_scenarios.py decide whether that is right.
Every driver has the methods of `Driver`; `build(name, bootstrap)` makes
one, or raises `ClientUnavailable` when the client is not installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..scenario_data import Received

ADMIN_RETENTION_MS = "3600000"  # the value alter_configs sets on retention.ms


NO_CONSUMER_PROTOCOL = "this client has no consumer group protocol (KIP-848, group.protocol=consumer)"


class ClientUnavailable(Exception):
    """The client family is not installed on this machine (the test is skipped)."""


class NotApplicable(Exception):
    """The client has no way to do this at all (e.g. kcat has no admin API)."""


class Driver:
    """The questions a scenario asks a client. Topics are Kafka names as the user types them."""

    name = ""  # the matrix column, also the pytest marker
    version = ""  # "kafka-clients 3.9.1", shown in the matrix

    def produce(
        self, topic: str, n: int, *, prefix: str = "", compression: str | None = None,
        acks: str = "all", idempotent: bool = False, partition: int = 0,
    ) -> list[int] | None:
        """Send records 0..n-1 (scenario_data); the offsets acknowledged (-1 each
        when acks=0), or None from a client that never shows them (kcat)."""
        raise NotImplementedError

    def consume(
        self, topic: str, n: int, *, start: str | int = "earliest", produce_after: int = 0,
        partition: int = 0,
    ) -> list[Received]:
        """Assign one partition without a group and read n records.

        start: "earliest", "latest" or a timestamp in ms (looked up through the
        client's offsets-for-times call). With produce_after, the driver sends
        records with prefix "new-" (numbered from 0) through its own producer
        once the consumer is positioned; a client that cannot tell when that is
        sends one at a time until n arrive, so "latest" is observable either way.
        """
        raise NotImplementedError

    def group_consume(self, topic: str, group: str, n: int) -> list[Received]:
        """Subscribe in `group`, read n records, commit the offset after the n-th, leave."""
        raise NotImplementedError

    def group_of_three(self, topic: str, group: str) -> dict[str, Any]:
        """Three members subscribe; once each holds a partition one leaves.

        Returns {"before": [partitions of member 1, 2, 3], "after": [of the two left]}.
        """
        raise NotImplementedError

    def create_describe_topic(self, topic: str, partitions: int) -> dict[str, Any]:
        """Create through the admin API; {"partitions": n described, "listed": in the topic list}."""
        raise NotImplementedError

    def alter_configs(self, topic: str) -> dict[str, Any]:
        """Set retention.ms to ADMIN_RETENTION_MS; {"before": value, "after": value} as described."""
        raise NotImplementedError

    def create_partitions(self, topic: str, total: int) -> int:
        """Grow the topic to `total`; the partition count described afterwards."""
        raise NotImplementedError

    def delete_records(self, topic: str, before: int) -> int:
        """Delete partition 0's records before `before`; the earliest offset listed afterwards."""
        raise NotImplementedError

    def delete_topic(self, topic: str) -> bool:
        """Delete the topic; whether it is still listed afterwards."""
        raise NotImplementedError

    def list_describe_groups(self, topic: str, group: str) -> dict[str, Any]:
        """With one member of `group` consuming `topic`: list and describe groups.

        {"listed": group in the list, "state": described state, "members": count,
        "partitions": partitions assigned to the member, as described}.
        """
        raise NotImplementedError

    # The consumer group protocol (KIP-848, group.protocol=consumer): the broker assigns the
    # partitions and a member gives up only those that move (test_consumer_protocol.py).

    def consumer_protocol_missing(self) -> str | None:
        """Why this client cannot use group.protocol=consumer at all, or None when it can."""
        return NO_CONSUMER_PROTOCOL

    def kip848_group_consume(self, topic: str, group: str, n: int) -> list[Received]:
        """group_consume with group.protocol=consumer."""
        raise NotImplementedError

    def kip848_join_and_leave(self, topic: str, group: str, partitions: int) -> dict[str, Any]:
        """Member A subscribes and holds every partition; B joins, both hold some; B leaves, A holds all.

        {"alone": A's partitions, "joined": [A's, B's], "a_revoked": [each set A was told to give
        up, in order], "after_leave": A's}.
        """
        raise NotImplementedError

    def kip848_regex(self, pattern: str, group: str, n: int) -> list[Received]:
        """Subscribe to the regular expression `pattern` (the broker resolves it), read n records."""
        raise NotImplementedError

    def kip848_static_member(self, topic: str, group: str, partitions: int) -> dict[str, Any]:
        """Members with group.instance.id "a" and "b" share the partitions; "a" closes and
        a new consumer with its instance id comes back.

        {"before": [a's, b's], "after": [a's, b's], "b_revoked": [each set b was told to give up
        from "before" on]}.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Free what the driver holds (a compiled program, a JVM, ...)."""


_FACTORIES = {
    "java": ("java", "JavaDriver"),
    "librdkafka": ("librdkafka", "ConfluentDriver"),
    "kcat": ("kcat", "KcatDriver"),
    "kafka_python": ("kafka_python", "KafkaPythonDriver"),
    "aiokafka": ("aiokafka_client", "AiokafkaDriver"),
    "kafkajs": ("kafkajs", "KafkajsDriver"),
}
CLIENTS = tuple(_FACTORIES)


def build(name: str, bootstrap: str) -> Driver:
    module, cls = _FACTORIES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(bootstrap)
