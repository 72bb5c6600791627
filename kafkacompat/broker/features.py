"""Feature levels for ApiVersions (v3+), as `kafka-features describe` reads them.

Kafka finalizes feature levels cluster-wide; clients and tools gate
behaviour on them (a transaction.version of 2 makes the Java producer use
KIP-890's second protocol, group.version 1 announces KIP-848 groups). So
each level here follows from what this broker serves, never more:
metadata.version is Kafka 4.1's (the API versions served are 4.1's), the
group and transaction levels follow the APIs registered, and the features
of replication and of KRaft's quorum stay at 0 (one node, no quorum).
"""

from __future__ import annotations

from kafkacompat.protocol.versions import SUPPORTED

METADATA_VERSION_4_1_IV1 = 27
METADATA_VERSION_3_3_IV3 = 7  # the oldest Kafka 4.x supports
CONSUMER_GROUP_HEARTBEAT, END_TXN, SHARE_GROUP_HEARTBEAT = 68, 26, 76
FINALIZED_EPOCH = 1  # levels never change while the broker runs


def _group_version() -> int:
    return 1 if CONSUMER_GROUP_HEARTBEAT in SUPPORTED else 0


def _share_version() -> int:
    return 1 if SHARE_GROUP_HEARTBEAT in SUPPORTED else 0


def _transaction_version() -> int:
    if END_TXN not in SUPPORTED:
        return 0
    return 2 if SUPPORTED[END_TXN][1] >= 5 else 1  # EndTxn v5 is KIP-890 part 2


def supported() -> dict[str, tuple[int, int]]:
    """name -> (min, max) level this broker could run at."""
    return {
        "eligible.leader.replicas.version": (0, 0),
        "group.version": (0, _group_version()),
        "kraft.version": (0, 0),
        "metadata.version": (METADATA_VERSION_3_3_IV3, METADATA_VERSION_4_1_IV1),
        "share.version": (0, _share_version()),
        "transaction.version": (0, _transaction_version()),
    }


def finalized(transaction_version: int = 2, share_version: int = 1) -> dict[str, int]:
    """name -> the level in force; features at level 0 are left out, as Kafka leaves them out.

    `transaction_version` and `share_version` are the operator's choice (the
    broker's settings of those names), capped by what is served.
    """
    levels = {
        "group.version": _group_version(),
        "metadata.version": METADATA_VERSION_4_1_IV1,
        "share.version": min(share_version, _share_version()),
        "transaction.version": min(transaction_version, _transaction_version()),
    }
    return {name: level for name, level in levels.items() if level > 0}
