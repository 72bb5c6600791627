"""The pure parts of placement: every broker computes the same leaders and coordinators."""

from __future__ import annotations

import collections

from kafkacompat.cluster.leadership import LeaderRow, plan, preferred_leader
from kafkacompat.cluster.membership import coordinator_partition, java_string_hash


def test_java_string_hash_matches_java() -> None:
    # values printed by Java 17: for (String s : ...) System.out.println(s.hashCode())
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_string_hash("é") == 233


def test_coordinator_partition_as_kafka_picks_it() -> None:
    assert coordinator_partition("hello", 50) == 99162322 % 50
    assert coordinator_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


def test_partitions_spread_evenly_over_live_brokers() -> None:
    keys = [("/default", f"topic-{t}", p) for t in range(20) for p in range(6)]
    counts = collections.Counter(preferred_leader([1, 2, 3], key) for key in keys)
    assert set(counts) == {1, 2, 3}
    assert max(counts.values()) - min(counts.values()) <= 6
    # partitions of one topic go round the brokers
    assert len({preferred_leader([1, 2, 3], ("/default", "t", p)) for p in range(3)}) == 3


def test_plan_moves_only_dead_leaders_and_own_partitions() -> None:
    live = [1, 2]
    keys = [("/default", "t", p) for p in range(4)]
    want = {key: preferred_leader(live, key) for key in keys}
    rows = {
        keys[0]: LeaderRow(3, 7),                     # leader 3 is dead: anyone moves it
        keys[1]: LeaderRow(want[keys[1]], 2),        # already right: left alone
    }
    other = 2 if want[keys[2]] == 1 else 1
    rows[keys[2]] = LeaderRow(other, 0)              # led by a live broker that should not: only it moves it
    missing, moves = plan(1, live, keys, rows)
    assert missing == {keys[3]: want[keys[3]]}
    moved = {key: (row, new) for key, row, new in moves}
    assert moved[keys[0]] == (LeaderRow(3, 7), want[keys[0]])
    assert keys[1] not in moved
    assert (keys[2] in moved) == (other == 1)


def test_plan_with_no_live_broker_writes_nothing() -> None:
    assert plan(1, [], [("/default", "t", 0)], {}) == ({}, [])
