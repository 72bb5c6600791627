"""One share-partition's delivery state (KIP-932), after Kafka 4.1's SharePartition.

A share group reads a topic partition cooperatively: every record from the
share-partition start offset (SPSO) on is in flight with a state and a
delivery count. ShareFetch acquires AVAILABLE records (and records past the
in-flight window, whole batches at a time) for one member under a lock; an
acknowledgement makes them ACKNOWLEDGED (accept), AVAILABLE again (release)
or ARCHIVED (reject, a gap); a lock that runs out makes them AVAILABLE again.
A record whose delivery count reached the limit is ARCHIVED instead of
becoming AVAILABLE; under share.isolation.level=read_committed the records
of aborted transactions are ARCHIVED as soon as they are acquired. The SPSO
moves past the leading records that are done (ACKNOWLEDGED or ARCHIVED). This
class is pure: no I/O and no clock of its own; `manager.py` reads the log,
runs the lock timers and stores `record()`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids, as kept in the share-group state."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class InvalidRecordState(Exception):
    """An acknowledgement of records this member does not hold (Kafka's INVALID_RECORD_STATE)."""


class InvalidRequest(Exception):
    """An acknowledgement that is malformed (Kafka's INVALID_REQUEST)."""


@dataclasses.dataclass(slots=True)
class InFlight:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member: str | None = None  # who holds it while ACQUIRED
    acquisition: int = 0  # which acquisition's lock holds it


@dataclasses.dataclass(frozen=True, slots=True)
class Acquired:
    """A run of acquired offsets with one delivery count (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    """The in-flight records of (group, topic, partition) from the SPSO up to `end_offset`."""

    def __init__(self, start_offset: int, delivery_count_limit: int) -> None:
        self.start_offset = start_offset  # SPSO: every offset below is done
        # the SPSO as Kafka's share coordinator shows it (DescribeShareGroupOffsets): Kafka writes each
        # state change with the SPSO from before that change moved it, so what it shows lags one change
        self.written_start_offset = start_offset
        self.end_offset = start_offset  # first offset never acquired yet
        self.delivery_count_limit = delivery_count_limit
        self.records: dict[int, InFlight] = {}  # every offset in [start_offset, end_offset)
        self._acquisitions = 0
        self.state_epoch = 0

    # acquiring ---------------------------------------------------------------------
    def first_available(self) -> int:
        """Where the next acquisition starts reading the log."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def held(self) -> int:
        """How many records members hold now (each under an acquisition lock)."""
        return sum(1 for entry in self.records.values() if entry.state is RecordState.ACQUIRED)

    def next_acquisition(self) -> int:
        self._acquisitions += 1
        return self._acquisitions

    def acquire_batch(self, first: int, last: int, member: str, acquisition: int) -> list[int]:
        """Acquire what may be acquired of one log batch [first, last]; the offsets taken.

        Offsets past the in-flight window are new (first delivery); inside
        it only AVAILABLE ones are taken, their delivery count going up.
        """
        taken = []
        for offset in range(max(first, self.start_offset), last + 1):
            if offset >= self.end_offset:
                for gap in range(self.end_offset, offset):  # never read: nothing to deliver
                    self.records[gap] = InFlight(RecordState.ARCHIVED)
                self.records[offset] = InFlight()
                self.end_offset = offset + 1
            entry = self.records[offset]
            if entry.state is RecordState.AVAILABLE:
                entry.state, entry.member, entry.acquisition = RecordState.ACQUIRED, member, acquisition
                entry.delivery_count += 1
                taken.append(offset)
        return taken

    def archive(self, offsets: Iterable[int]) -> None:
        """Records just acquired that no member may get: an aborted transaction's under read_committed.

        As Kafka's SharePartition, they are acquired first (their delivery
        count goes up) and archived at once, and the SPSO moves past them.
        """
        for offset in offsets:
            entry = self.records[offset]
            entry.state, entry.member = RecordState.ARCHIVED, None
        self._advance()

    def runs(self, offsets: Sequence[int]) -> list[Acquired]:
        """Contiguous runs of the offsets with the same delivery count."""
        out: list[Acquired] = []
        for offset in offsets:
            count = self.records[offset].delivery_count
            if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
                out[-1] = Acquired(out[-1].first_offset, offset, count)
            else:
                out.append(Acquired(offset, offset, count))
        return out

    # giving back ---------------------------------------------------------------------
    def _make_available(self, entry: InFlight) -> None:
        entry.member = None
        entry.state = (RecordState.ARCHIVED if entry.delivery_count >= self.delivery_count_limit
                       else RecordState.AVAILABLE)

    def expire(self, acquisition: int) -> bool:
        """The lock of one acquisition ran out: its records still held become available. Changed?"""
        changed = False
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.acquisition == acquisition:
                self._make_available(entry)
                changed = True
        if changed:
            self._advance()
        return changed

    def release_member(self, member: str) -> bool:
        """A member's share session ended: what it still holds becomes available. Changed?

        As Kafka, these records count as never delivered: their delivery
        count goes back down, so they are never archived for it.
        """
        changed = False
        for entry in self.records.values():
            if entry.state is RecordState.ACQUIRED and entry.member == member:
                entry.state, entry.member = RecordState.AVAILABLE, None
                entry.delivery_count = max(entry.delivery_count - 1, 0)
                changed = True
        if changed:
            self._advance()
        return changed

    def acknowledge(self, member: str, batches: Iterable[tuple[int, int, Sequence[int]]]) -> None:
        """Apply (first, last, types) acknowledgement batches of one member, all or nothing."""
        changes: list[tuple[InFlight, AcknowledgeType]] = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidRequest(f"Invalid acknowledgement batch {first}-{last}")
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                try:
                    ack = AcknowledgeType(kind)
                except ValueError:
                    raise InvalidRequest(f"Invalid acknowledge type {kind}") from None
                entry = self.records.get(offset)
                if entry is None or entry.state is not RecordState.ACQUIRED or entry.member != member:
                    raise InvalidRecordState(
                        f"The record state is invalid. The acknowledgement of delivery could not be completed "
                        f"for offset {offset}.")
                changes.append((entry, ack))
        for entry, ack in changes:
            if ack is AcknowledgeType.ACCEPT:
                entry.state, entry.member = RecordState.ACKNOWLEDGED, None
            elif ack is AcknowledgeType.RELEASE:
                self._make_available(entry)
            else:  # REJECT and GAP: never delivered again
                entry.state, entry.member = RecordState.ARCHIVED, None
        self._advance()

    def _advance(self) -> None:
        """Move the SPSO past the leading records that are done (a state change, written as Kafka writes it)."""
        self.written_start_offset = self.start_offset
        while self.start_offset < self.end_offset:
            entry = self.records[self.start_offset]
            if entry.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                return
            del self.records[self.start_offset]
            self.start_offset += 1

    def skip_to(self, log_start_offset: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) are no longer in flight."""
        while self.start_offset < log_start_offset:
            self.records.pop(self.start_offset, None)
            self.start_offset += 1
        self.end_offset = max(self.end_offset, self.start_offset)

    def reset(self, start_offset: int) -> None:
        """A new SPSO (AlterShareGroupOffsets): nothing in flight."""
        self.records.clear()
        self.start_offset = self.end_offset = self.written_start_offset = start_offset
        self.state_epoch += 1

    # durable state ------------------------------------------------------------------
    def record(self) -> dict:
        """The state to keep: SPSO and runs of [first, last, state, delivery count]; locks are not kept."""
        runs: list[list[int]] = []
        for offset in range(self.start_offset, self.end_offset):
            entry = self.records[offset]
            state = RecordState.AVAILABLE if entry.state is RecordState.ACQUIRED else entry.state
            if runs and runs[-1][2] == state and runs[-1][3] == entry.delivery_count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, int(state), entry.delivery_count])
        return {"start_offset": self.start_offset, "written_start_offset": self.written_start_offset,
                "state_epoch": self.state_epoch, "batches": runs}

    @classmethod
    def restore(cls, record: dict, delivery_count_limit: int) -> "SharePartition":
        part = cls(record["start_offset"], delivery_count_limit)
        part.state_epoch = record.get("state_epoch", 0)
        part.written_start_offset = record.get("written_start_offset", part.start_offset)
        for first, last, state, count in record["batches"]:
            for offset in range(first, last + 1):
                part.records[offset] = InFlight(RecordState(state), count)
            part.end_offset = max(part.end_offset, last + 1)
        return part
