"""KIP-848 (group.protocol=consumer) over the wire, on kafkacompat and on Kafka 4.1 side by side.

Each scenario (tests/groups/kip848_scenarios.py) drives raw
ConsumerGroupHeartbeat members and returns what clients observe; the
kafkacompat tests assert it, the reference tests (slow: they start a
Kafka 4.1 broker) assert kafkacompat observes exactly what Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.reference import ReferenceKafka
from kafkacompat.testing import Broker
from tests.groups import kip848_scenarios as scenarios
from tests.groups.helpers import commit, create_topic, wait_for
from tests.groups.kip848 import KIP848_BROKER, KIP848_HEARTBEAT_MS, KIP848_SESSION_MS, RawMember, settle, topic_names

HEARTBEAT_MS, SESSION_MS = KIP848_HEARTBEAT_MS, KIP848_SESSION_MS


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**KIP848_BROKER) as running:
        yield running


def test_range_gives_static_members_their_ranges_and_a_leaver_s_share_to_the_rest(broker: Broker) -> None:
    seen = scenarios.range_static(broker.bootstrap_servers)
    assert seen["first"] == {
        "i0": {"a": [0, 1], "b": [0]}, "i1": {"a": [2, 3], "b": [1]}, "i2": {"a": [4, 5], "b": [2]},
    }
    assert seen["describe"] == {
        "state": "Stable", "assignor": "range", "epochs_agree": True, "member_type": [1],
        "targets_are_current": True, "subscribed": [("a", "b")] * 3,
    }
    assert seen["leave"] == (0, -1)
    assert seen["after"] == {"i0": {"a": [0, 1, 2], "b": [0, 1]}, "i2": {"a": [3, 4, 5], "b": [2]}}


def test_uniform_balances_one_topic_over_three_members(broker: Broker) -> None:
    seen = scenarios.uniform_chunks(broker.bootstrap_servers)
    assert seen["sizes"] == [2, 2, 3]
    assert seen["union"] == list(range(7))
    assert seen["assignor"] == "uniform"
    assert seen["interval_ms"] == HEARTBEAT_MS


def test_uniform_balances_members_with_different_subscriptions(broker: Broker) -> None:
    assert scenarios.uniform_heterogeneous(broker.bootstrap_servers) == {
        "each partition once": True, "only subscribed topics": True, "spread": 1,
    }


def test_partitions_are_revoked_before_they_are_assigned(broker: Broker) -> None:
    assert scenarios.revoke_before_assign(broker.bootstrap_servers) == [
        # epochs relative to the first member's once it owns the topic
        ("two joins", 1, []),  # the next epoch, but its partitions are still owned by one
        ("one told to revoke", 0, [0, 1, 2]),  # one keeps its epoch until it has let go
        ("two waits", 1, None),
        ("one revoked", 1, None),
        ("two gets partitions", 1, [3, 4, 5]),
    ]


def test_static_member_leaves_with_epoch_minus_two_and_gets_its_partitions_back(broker: Broker) -> None:
    seen = scenarios.static_rejoin(broker.bootstrap_servers)
    assert seen["clash"][0] == 111  # UNRELEASED_INSTANCE_ID while the instance is still in use
    assert seen["leave"] == (0, -2)
    assert dict(seen["while_gone"])["i0"] == -2
    assert seen["rejoin_error"] == 0 and seen["rejoin_same_partitions"] and seen["b_epoch_unchanged"]


def test_refused_heartbeats_answer_kafka_s_errors(broker: Broker) -> None:
    codes = {what: code for what, code, _ in scenarios.heartbeat_errors(broker.bootstrap_servers)}
    assert codes == {
        "unsupported assignor": 112, "unknown group": 25, "unknown member": 25, "epoch ahead": 110,
        "no subscription": 42, "empty member id": 42, "bad epoch": 42, "static leave without instance": 42,
        "unknown instance leaves": 25, "leave unknown group": 69,
    }


def test_commits_and_fetches_check_the_member_epoch(broker: Broker) -> None:
    seen = scenarios.commits_with_epochs(broker.bootstrap_servers)
    assert seen["current epoch"] == 0 and seen["stale epoch"] == 113 and seen["unknown member"] == 25
    assert seen["v8 from a member"] == 35
    assert seen["fetch current"] == (0, [5]) and seen["fetch stale"] == 113 and seen["fetch admin"] == (0, [5])


def test_list_describe_and_delete_see_consumer_groups(broker: Broker) -> None:
    seen = scenarios.admin_view(broker.bootstrap_servers)
    live = {("consumer", "Stable", "consumer")}
    assert seen["listed"] == seen["consumer type"] == seen["stable state"] == live
    assert seen["classic type"] == seen["empty state"] == set()
    assert seen["describe classic api"] == (0, "Dead", "", 0)
    assert seen["describe classic api v6"] == [
        (69, "Group g-<tag> is not a classic group.", "Dead", 0),  # GROUP_ID_NOT_FOUND
        (69, "Group missing-<tag> not found.", "Dead", 0),
    ]
    assert seen["delete live"] == 68  # NON_EMPTY_GROUP
    assert seen["after leave"] == {("consumer", "Empty", "consumer")}
    assert seen["delete empty"] == 0 and seen["after delete"] == set()


def test_empty_classic_group_converts_and_a_live_one_of_another_protocol_refuses(broker: Broker) -> None:
    seen = scenarios.classic_groups_and_consumer_joins(broker.bootstrap_servers)
    assert seen["simple converts"] == (0, True)
    assert seen["live refuses"] == (
        69, "Cannot upgrade classic group live-<tag> to consumer group because the group does not use "
        "the consumer embedded protocol.",
    )


def test_a_live_classic_group_upgrades_and_serves_its_classic_member(broker: Broker) -> None:
    assert scenarios.online_upgrade(broker.bootstrap_servers) == [
        ("classic group", 0, 1),
        ("consumer joins", 0, 1, []),  # next epoch; the classic member still owns everything
        ("classic heartbeat", 27),  # REBALANCE_IN_PROGRESS: rejoin
        ("classic rejoins", 0, 1, "consumer", "range", False, 0),  # the coordinator assigns: no leader work
        ("classic syncs", 0, [("t", [0, 1])]),
        ("consumer settles", 1, [("t", [2, 3])]),
        ("classic heartbeat", 0),
        ("describe", "Stable", [(0, 1), (1, 1)]),  # member types: classic 0, consumer 1
        ("classic leaves", [0]),
        ("consumer alone", [("t", [0, 1, 2, 3])]),
    ]


def test_a_consumer_group_of_classic_members_only_downgrades_and_rebalances(broker: Broker) -> None:
    assert scenarios.online_downgrade(broker.bootstrap_servers) == [
        ("consumer leaves", 0, -1),
        ("describe", 69, "Group g-<tag> is not a consumer group."),  # a classic group again
        ("classic heartbeat", 27),  # REBALANCE_IN_PROGRESS: the classic group rebalances
        ("classic rejoins", 0, 2, True, [True]),  # a classic rebalance: it leads and assigns
        ("classic syncs", 0, [("t", [0, 1, 2, 3])]),
        ("listed", [("classic", "Stable")]),
    ]


def test_added_partitions_are_assigned(broker: Broker) -> None:
    seen = scenarios.partitions_grow(broker.bootstrap_servers)
    assert seen == {"union": [0, 1, 2, 3], "sizes": [2, 2], "epoch moved": True}


def test_silent_member_is_fenced_after_the_session_timeout(broker: Broker) -> None:
    seen = scenarios.session_expiry(broker.bootstrap_servers)
    assert seen["split"] == [2, 2] and seen["alive owns"] == [0, 1, 2, 3]
    assert SESSION_MS / 1000 - 0.5 <= seen["took"] <= SESSION_MS / 1000 + 3
    assert seen["silent then"] == 25  # UNKNOWN_MEMBER_ID: it must rejoin


def test_a_groups_own_session_timeout_and_heartbeat_interval_override_the_brokers(broker: Broker) -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms set on the group (Admin API, GROUP resource):
    members are told the group's interval, and a silent one outlives the broker's 3 s session until the group's 8 s."""
    seen = scenarios.group_timers_override(broker.bootstrap_servers)
    assert seen["interval_ms"] == scenarios.GROUP_HEARTBEAT_MS
    assert seen["kept past the broker's session timeout"] and seen["fenced"]
    assert scenarios.GROUP_SESSION_MS / 1000 - 0.5 <= seen["took"] <= scenarios.GROUP_SESSION_MS / 1000 + 3
    assert seen["silent then"] == 25  # UNKNOWN_MEMBER_ID: it must rejoin


SAME_AS_KAFKA = [
    "range_static", "uniform_chunks", "revoke_before_assign", "static_rejoin", "heartbeat_errors",
    "commits_with_epochs", "admin_view", "partitions_grow", "uniform_heterogeneous", "online_upgrade",
    "online_downgrade", "classic_groups_and_consumer_joins",
]


# A heartbeat (epoch > 0) for a group the coordinator does not know: Kafka, which persists groups,
# answers GROUP_ID_NOT_FOUND (fatal to clients); kafkacompat keeps groups in memory and answers
# UNKNOWN_MEMBER_ID so that members rejoin after a broker restart.
UNKNOWN_GROUP_ON_KAFKA = ("unknown group", 69, "Consumer group nope-<tag> not found.")
UNKNOWN_GROUP_HERE = ("unknown group", 25, "Member <member> is not a member of group nope-<tag>.")


def _comparable(name: str, seen: Any) -> Any:
    if name == "uniform_chunks":
        return {k: v for k, v in seen.items() if k != "contiguous"}
    if name == "heartbeat_errors":
        return [UNKNOWN_GROUP_HERE if row == UNKNOWN_GROUP_ON_KAFKA else row for row in seen]
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("name", SAME_AS_KAFKA)
def test_kafkacompat_observes_what_kafka_4_1_does(name: str, broker: Broker, kafka41: ReferenceKafka) -> None:
    scenario = getattr(scenarios, name)
    theirs = _comparable(name, scenario(kafka41.bootstrap_servers))
    ours = _comparable(name, scenario(broker.bootstrap_servers))
    assert ours == theirs


@pytest.mark.slow
@pytest.mark.parametrize("timed", ["session_expiry", "group_timers_override"])
def test_timers_take_as_long_as_on_kafka_4_1(broker: Broker, kafka41: ReferenceKafka, timed: str) -> None:
    """A member's session expiring (the broker's timeout; the group's own overriding it): same answers, same wait."""
    scenario = getattr(scenarios, timed)
    theirs = scenario(kafka41.bootstrap_servers)
    ours = scenario(broker.bootstrap_servers)
    assert {k: v for k, v in ours.items() if k != "took"} == {k: v for k, v in theirs.items() if k != "took"}
    assert abs(ours["took"] - theirs["took"]) < 2.0


def test_regex_subscription_follows_topic_creation_and_refuses_what_re2_refuses(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    tag = scenarios._tag()
    for name, partitions in ((f"rx{tag}-a", 2), (f"rx{tag}-b", 1), (f"other{tag}", 1)):
        create_topic(bootstrap, name, partitions)
    member = RawMember(bootstrap, f"g-{tag}", regex=f"rx{tag}-.*")
    try:
        settle([member])
        ids = topic_names(member.wire, [f"rx{tag}-a", f"rx{tag}-b", f"rx{tag}-c"])
        assert member.named(ids) == {f"rx{tag}-a": [0, 1], f"rx{tag}-b": [0]}
        create_topic(bootstrap, f"rx{tag}-c", 2)
        ids = topic_names(member.wire, [f"rx{tag}-a", f"rx{tag}-b", f"rx{tag}-c"])

        def has_new_topic() -> bool:
            member.heartbeat()
            return f"rx{tag}-c" in member.named(ids)

        wait_for(has_new_topic, 10, "the new matching topic to be assigned")
    finally:
        member.close()
    refused = RawMember(bootstrap, f"g2-{tag}", regex="(?=lookahead)")
    try:
        assert refused.heartbeat().error_code == 128  # INVALID_REGULAR_EXPRESSION, as RE2/J refuses lookaround
    finally:
        refused.close()


def test_consumer_group_offsets_expire_unless_subscribed_and_the_empty_group_goes(broker: Broker) -> None:
    """Kafka's rule for consumer groups: commits expire by age, except for topics members subscribe to."""
    tag = scenarios._tag()
    subscribed, other = f"ex{tag}-s", f"ex{tag}-o"
    create_topic(broker.bootstrap_servers, subscribed, 1)
    create_topic(broker.bootstrap_servers, other, 1)
    group = f"g-{tag}"
    member = RawMember(broker.bootstrap_servers, group, (subscribed,))
    try:
        settle([member])
        offsets = {(subscribed, 0): (1, None), (other, 0): (2, None)}
        assert set(commit(member.wire, 9, group, offsets, member.epoch, member.member_id).values()) == {0}
        coordinator = broker.server.cluster.groups
        later = coordinator._clock() + coordinator.config.offsets_retention_minutes * 60_000 + 1
        broker.call(coordinator.expire_offsets(now=later))  # other tests' groups on this broker expire too
        assert broker.committed(group, subscribed) == {0: 1} and broker.committed(group, other) == {}
        member.leave()
        broker.call(coordinator.expire_offsets(now=later))
        assert broker.committed(group, subscribed) == {}
        assert group not in coordinator.consumer.groups
    finally:
        member.close()
