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


def test_a_death_moves_only_the_partitions_the_dead_broker_led() -> None:
    """As on Kafka: a killed broker keeps its registration (its lease lapsed), so the others keep
    leading what they led; only its partitions move, spread over the live ones, and they come
    back to it once it is live again."""
    registered = [1, 2, 3]
    keys = [("/default", f"topic-{t}", p) for t in range(10) for p in range(6)]
    rows = {key: LeaderRow(preferred_leader(registered, key), 0) for key in keys}
    moved = {key: new for key, _, new in plan(1, [1, 3], keys, rows, registered)[1]}
    assert set(moved) == {key for key, row in rows.items() if row.leader == 2}
    assert set(moved.values()) == {1, 3}  # spread, not all onto one broker
    after = {key: LeaderRow(moved.get(key, row.leader), row.epoch + (key in moved)) for key, row in rows.items()}
    assert plan(3, [1, 3], keys, after, registered) == ({}, [])  # settled: nothing moves again
    back = {key: new for key, _, new in plan(1, [1, 2, 3], keys, after, registered)[1]}
    assert back == {key: 2 for key in moved if after[key].leader == 1}  # each leader hands back its own


def test_an_unregistered_broker_s_partitions_spread_over_the_brokers_left() -> None:
    """A node id retired by UnregisterBroker has no row any more: the rest is spread over those left.
    (A clean stop keeps the row, as a kill does: only the stopped broker's partitions move.)"""
    keys = [("/default", "t", p) for p in range(6)]
    rows = {key: LeaderRow(preferred_leader([1, 2, 3], key), 0) for key in keys}
    missing, moves = plan(1, [1, 3], keys, rows, [1, 3])
    assert {key: new for key, _, new in moves} == {
        key: preferred_leader([1, 3], key) for key, row in rows.items()
        if preferred_leader([1, 3], key) != row.leader and row.leader in (1, 2)}
