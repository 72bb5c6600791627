"""The delivery state of one share-partition, and the share group assignor (pure logic, no broker)."""

from __future__ import annotations

import uuid

import pytest

from kafkacompat.shares.share_group import simple_assign
from kafkacompat.shares.share_partition import Acquired, InvalidRecordState, InvalidRequest, RecordState, SharePartition

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def _acquire(part: SharePartition, first: int, last: int, member: str = "a") -> tuple[int, list[int]]:
    acquisition = part.next_acquisition()
    return acquisition, part.acquire_batch(first, last, member, acquisition)


def test_new_batches_are_acquired_whole_with_delivery_count_one() -> None:
    part = SharePartition(0, delivery_count_limit=5)
    _, taken = _acquire(part, 0, 4)
    assert taken == [0, 1, 2, 3, 4] and part.runs(taken) == [Acquired(0, 4, 1)]
    assert part.first_available() == 5  # nothing available: the next acquisition reads new records


def test_accept_and_reject_move_the_start_offset_release_comes_back_with_count_two() -> None:
    part = SharePartition(0, delivery_count_limit=5)
    _acquire(part, 0, 2)
    part.acknowledge("a", [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 2, (REJECT,))])
    assert part.start_offset == 1 and part.first_available() == 1
    _, taken = _acquire(part, 0, 2, "b")
    assert taken == [1] and part.runs(taken) == [Acquired(1, 1, 2)]
    part.acknowledge("b", [(1, 1, (ACCEPT,))])
    assert part.start_offset == 3 and not part.records


def test_only_the_holder_may_acknowledge_and_a_bad_batch_changes_nothing() -> None:
    part = SharePartition(0, delivery_count_limit=5)
    _acquire(part, 0, 1)
    with pytest.raises(InvalidRecordState):
        part.acknowledge("b", [(0, 0, (ACCEPT,))])
    with pytest.raises(InvalidRecordState):  # offset 2 was never acquired: offset 0 stays acquired too
        part.acknowledge("a", [(0, 0, (ACCEPT,)), (2, 2, (ACCEPT,))])
    assert part.records[0].state is RecordState.ACQUIRED
    with pytest.raises(InvalidRequest):
        part.acknowledge("a", [(0, 1, (ACCEPT, RELEASE, REJECT))])  # three types for two offsets


def test_lock_expiry_makes_records_available_and_archives_at_the_limit() -> None:
    part = SharePartition(0, delivery_count_limit=2)
    acquisition, _ = _acquire(part, 0, 0)
    assert part.expire(acquisition) and part.records[0].state is RecordState.AVAILABLE
    acquisition, taken = _acquire(part, 0, 0)
    assert part.runs(taken) == [Acquired(0, 0, 2)]
    part.expire(acquisition)  # the second delivery was the last: archived, and the start offset moves on
    assert part.start_offset == 1


def test_a_closed_session_gives_records_back_uncounted() -> None:
    part = SharePartition(0, delivery_count_limit=1)
    _acquire(part, 0, 1, "a")
    assert part.release_member("a")
    assert [part.records[o].delivery_count for o in (0, 1)] == [0, 0]  # never archived for it, as Kafka
    assert part.first_available() == 0


def test_the_stored_state_keeps_progress_and_counts_but_not_locks() -> None:
    part = SharePartition(0, delivery_count_limit=5)
    _acquire(part, 0, 3)
    part.acknowledge("a", [(0, 0, (ACCEPT,)), (2, 2, (GAP,))])
    back = SharePartition.restore(part.record(), 5)
    assert back.start_offset == 1 and back.end_offset == 4
    assert [(back.records[o].state, back.records[o].delivery_count) for o in (1, 2, 3)] == [
        (RecordState.AVAILABLE, 1), (RecordState.ARCHIVED, 1), (RecordState.AVAILABLE, 1)]


def test_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    topic = uuid.uuid4()
    both = simple_assign({"a": frozenset({topic}), "b": frozenset({topic})}, {topic: 1})
    assert both == {"a": {topic: frozenset({0})}, "b": {topic: frozenset({0})}}
    spread = simple_assign({"a": frozenset({topic}), "b": frozenset({topic})}, {topic: 4})
    assert sorted(p for a in spread.values() for p in a[topic]) == [0, 1, 2, 3]
    assert all(len(a[topic]) == 2 for a in spread.values())


def test_held_counts_the_records_under_a_lock() -> None:
    part = SharePartition(0, delivery_count_limit=5)
    _acquire(part, 0, 3)
    part.acknowledge("a", [(0, 1, (ACCEPT,))])
    assert part.held() == 2
