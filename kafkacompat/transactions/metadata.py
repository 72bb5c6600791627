"""A transactional id's state, as Kafka's transaction coordinator keeps it.

States and their names are Kafka's (DescribeTransactions and
ListTransactions show them). The record is stored as JSON in the default
stream's `transactions` state table, so a restart resumes every
transaction where it stood.
"""

from __future__ import annotations

import dataclasses
import enum


class TxnState(str, enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"


PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

# (stream, topic, partition)
PartitionKey = tuple[str, str, int]
# (stream, topic, partition, offset, leader epoch, metadata)
PendingOffset = tuple[str, str, int, int, int, str]


@dataclasses.dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_epoch: int = -1  # the epoch before the last bump: a retried InitProducerId
    partitions: set[PartitionKey] = dataclasses.field(default_factory=set)
    groups: set[str] = dataclasses.field(default_factory=set)  # groups added by AddOffsetsToTxn
    offsets: dict[str, dict[tuple[str, str, int], PendingOffset]] = dataclasses.field(default_factory=dict)
    start_ms: int = -1  # when the open transaction began
    update_ms: int = -1
    # KIP-890: 2 when the transaction runs the v2 protocol (epoch bumped at every end), else 0 (v0/v1)
    client_version: int = 0
    prev_producer_id: int = -1  # before an epoch overflow at an EndTxn v5 gave a new one (its retry)
    next_producer_id: int = -1  # chosen at Prepare* when the epoch overflows, taken at Complete*

    def to_json(self) -> dict:
        return {
            "pid": self.producer_id, "epoch": self.producer_epoch, "last_epoch": self.last_producer_epoch,
            "timeout": self.timeout_ms, "state": self.state.value,
            "parts": sorted(list(p) for p in self.partitions), "groups": sorted(self.groups),
            "offsets": {g: [list(o) for o in table.values()] for g, table in self.offsets.items()},
            "start": self.start_ms, "update": self.update_ms,
            "tv": self.client_version, "prev_pid": self.prev_producer_id, "next_pid": self.next_producer_id,
        }

    @classmethod
    def from_json(cls, transactional_id: str, data: dict) -> TransactionMetadata:
        offsets: dict[str, dict[tuple[str, str, int], PendingOffset]] = {}
        for group, rows in data["offsets"].items():
            offsets[group] = {(r[0], r[1], r[2]): (r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows}
        return cls(
            transactional_id, data["pid"], data["epoch"], data["timeout"], TxnState(data["state"]),
            data["last_epoch"], {(p[0], p[1], p[2]) for p in data["parts"]}, set(data["groups"]), offsets,
            data["start"], data["update"], data.get("tv", 0), data.get("prev_pid", -1), data.get("next_pid", -1),
        )
