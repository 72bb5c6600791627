"""How many partitions a request may add: Kafka's per-request cap and a per-broker one.

Kafka's controller refuses a CreateTopics request adding more than 10,000
partitions in all with POLICY_VIOLATION "Excessively large number of
partitions per request." (checked against Kafka 4.1: every topic of the
request gets it, also with validate_only). Here CreatePartitions gets the
same answer; Kafka 4.1 answers UNKNOWN_SERVER_ERROR there after adding some.
The per-broker cap keeps a million partitions from ever existing: each one
costs every Metadata request for all topics.
"""

from __future__ import annotations

from typing import Protocol

from ..services import Settings, Topics
from .common import ErrorCode

PER_REQUEST_MESSAGE = "Excessively large number of partitions per request."


class Reaches(Settings, Topics, Protocol):
    """What of the broker this module reaches."""


def partition_limit_error(cluster: Reaches, adding: int, pending: int = 0) -> tuple[ErrorCode, str] | None:
    """POLICY_VIOLATION and why, when adding this many partitions passes a limit; else None.
    `pending` partitions are about to be added by the same request (CreateTopics creates its topics
    together, after checking each)."""
    config = cluster.config
    if adding > config.max_partitions_per_request:
        return ErrorCode.policy_violation, PER_REQUEST_MESSAGE
    existing = cluster.store.partition_count() + pending  # a running count: walking every topic made N creates cost N²
    if existing + adding > config.max_broker_partitions:
        return (
            ErrorCode.policy_violation,
            f"The broker has {existing} partitions; {adding} more would pass max_broker_partitions="
            f"{config.max_broker_partitions}.",
        )
    return None
