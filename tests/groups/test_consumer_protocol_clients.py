"""group.protocol=consumer (KIP-848) with stock clients: librdkafka (confluent-kafka) and Java 4.1's tools."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from compat_tests.reference import KafkaTools, ReferenceKafka, kafka_home
from kafkacompat.testing import Broker
from tests.groups.helpers import create_topic, produce, wait_for
from tests.groups.kip848 import KIP848_BROKER, KIP848_SESSION_MS, describe, targets_are_current
from tests.wire import Wire

SESSION_MS = KIP848_SESSION_MS


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**KIP848_BROKER) as running:
        yield running


def consumer(bootstrap: str, group: str, **extra: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", **extra,
    })


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def drain(members: list[Consumer], seen: dict[bytes, int], until: int | set[bytes], timeout: float = 30) -> None:
    """Poll every member until `until` distinct values (or every value of that set) were seen."""
    deadline = time.monotonic() + timeout

    def done() -> bool:
        return until <= seen.keys() if isinstance(until, set) else len(seen) >= until

    while not done() and time.monotonic() < deadline:
        for c in members:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                seen[msg.value()] = seen.get(msg.value(), 0) + 1


def test_librdkafka_members_share_partitions_exactly_once_and_take_over_a_leaver_s(broker: Broker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, 6)
    values = produce(broker.bootstrap_servers, topic, 300)
    members = [consumer(broker.bootstrap_servers, group) for _ in range(3)]
    try:
        for c in members:
            c.subscribe([topic])
        seen: dict[bytes, int] = {}
        drain(members, seen, len(values))
        assert set(seen) == values and set(seen.values()) == {1}  # each message once
        for c in members:
            c.poll(0.1)
        wait_for(lambda: sorted(len(assigned(c)) for c in members) == [2, 2, 2], 15, "a 2/2/2 split")
        assert set().union(*(assigned(c) for c in members)) == set(range(6))
        members[0].close()
        rest = members[1:]

        def taken_over() -> bool:
            for c in rest:
                c.poll(0.05)
            return sorted(len(assigned(c)) for c in rest) == [3, 3]

        wait_for(taken_over, 15, "the two others to take the leaver's partitions")
        more = produce(broker.bootstrap_servers, topic, 60, start=300)
        later: dict[bytes, int] = {}
        drain(rest, later, len(more))
        assert set(later) == more
    finally:
        for c in members[1:]:
            c.close()


CHILD = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "group.remote.assignor": "range"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


def seconds_until_a_killed_member_expires(broker: Broker, topic: str, group: str, wait_s: float) -> float:
    """Two range-assigned members of `group` on `topic` (6 partitions): one killed without leaving; how long
    until the other holds all six (only the session timeout can tell)."""
    a = consumer(broker.bootstrap_servers, group, **{"group.remote.assignor": "range"})
    child = subprocess.Popen([sys.executable, "-c", CHILD, broker.bootstrap_servers, group, topic])
    try:
        a.subscribe([topic])

        def half() -> bool:
            a.poll(0.05)
            return assigned(a) in ({0, 1, 2}, {3, 4, 5})

        wait_for(half, 30, "a range of three partitions each")
        child.kill()
        child.wait(10)
        start = time.monotonic()

        def a_has_all() -> bool:
            a.poll(0.05)
            return assigned(a) == set(range(6))

        wait_for(a_has_all, wait_s, "the killed member's session to expire")
        return time.monotonic() - start
    finally:
        a.close()
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_librdkafka_range_assignor_and_a_killed_member_expires(broker: Broker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, 6)
    waited = seconds_until_a_killed_member_expires(broker, topic, group, SESSION_MS / 1000 + 10)
    assert waited >= SESSION_MS / 1000 - 1


def test_librdkafka_members_follow_the_groups_own_session_timeout(broker: Broker) -> None:
    """consumer.session.timeout.ms set on the group with the Admin API (8 s, the broker's is 3 s): a killed
    librdkafka member keeps its partitions until the group's timeout, then the other takes them."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    group_session_s = 8
    create_topic(broker.bootstrap_servers, topic, 6)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", str(group_session_s * 1000),
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(10)
    waited = seconds_until_a_killed_member_expires(broker, topic, group, group_session_s + 10)
    assert waited >= group_session_s - 1  # not the broker's 3 s


def test_librdkafka_static_member_rejoins_with_its_partitions(broker: Broker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, 4)
    settings = {"group.remote.assignor": "range"}
    a = consumer(broker.bootstrap_servers, group, **{"group.instance.id": "a", **settings})
    b = consumer(broker.bootstrap_servers, group, **{"group.instance.id": "b", **settings})
    try:
        a.subscribe([topic])
        b.subscribe([topic])

        def split() -> bool:
            a.poll(0.05)
            b.poll(0.05)
            return assigned(a) == {0, 1} and assigned(b) == {2, 3}  # range orders static members by instance id
        wait_for(split, 20, "instance a with 0-1, b with 2-3")
        a.close()  # a static member leaves with epoch -2: its partitions wait for it
        a = consumer(broker.bootstrap_servers, group, **{"group.instance.id": "a", **settings})
        a.subscribe([topic])

        def back() -> bool:
            a.poll(0.05)
            b.poll(0.05)
            return assigned(a) == {0, 1} and assigned(b) == {2, 3}
        wait_for(back, 20, "instance a back with 0-1")
    finally:
        a.close()
        b.close()




@pytest.mark.slow
def test_java_console_consumer_with_the_consumer_protocol_and_consumer_groups_describe(
    broker: Broker, kafka_tools: KafkaTools,
) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, 3)
    values = produce(broker.bootstrap_servers, topic, 90, partitions=3)
    bootstrap = broker.bootstrap_servers
    consumed = kafka_tools.run(
        "kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
        "--from-beginning", "--max-messages", "90", "--timeout-ms", "30000",
        "--consumer-property", "group.protocol=consumer",
    )
    assert consumed.code == 0, consumed.err
    assert set(consumed.out.split()) == {v.decode() for v in values}
    described = kafka_tools.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert described.code == 0, described.err
    rows = [line.split() for line in described.out.splitlines() if line.startswith(group)]
    assert sorted((r[1], r[2], r[3], r[4]) for r in rows) == [(topic, str(p), "30", "30") for p in range(3)]
    # a classic group is still described (Admin falls back from ConsumerGroupDescribe to DescribeGroups)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-classic", "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    wait_for(lambda: classic.poll(0.1) is not None and bool(classic.assignment()), 20, "the classic consumer")
    classic.commit(asynchronous=False)
    shown = kafka_tools.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--members", "--group", group + "-classic")
    classic.close()
    assert shown.code == 0, shown.err
    assert "rdkafka" in shown.out and "#PARTITIONS" in shown.out


def _java_consumer(
    bootstrap: str, topic: str, group: str, out: Any, protocol: str = "consumer", idle_ms: int = 10_000,
) -> subprocess.Popen[str]:
    """kafka-console-consumer reading until it has seen nothing for `idle_ms`."""
    home = kafka_home()
    return subprocess.Popen(
        [str(home / "bin/kafka-console-consumer.sh"), "--bootstrap-server", bootstrap, "--topic", topic,
         "--group", group, "--from-beginning", "--timeout-ms", str(idle_ms),
         "--consumer-property", f"group.protocol={protocol}"],
        stdout=out, stderr=subprocess.DEVNULL, text=True,
        env={"KAFKA_HEAP_OPTS": "-Xmx256m", "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )


def _members(bootstrap: str, group: str) -> list[Any]:
    with Wire(bootstrap) as wire:
        found = describe(wire, group)[0]
    return list(found.members) if found.error_code == 0 and found.group_state == "Stable" else []


@pytest.mark.slow
def test_java_and_librdkafka_members_share_one_group_exactly_once(broker: Broker, tmp_path: Any) -> None:
    """A Java 4.1 consumer and a librdkafka consumer in one consumer-protocol group split the partitions."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    native = consumer(bootstrap, group)
    native.subscribe([topic])
    with open(tmp_path / "java.out", "w") as out:
        java = _java_consumer(bootstrap, topic, group, out)
        try:
            def two_members() -> bool:
                native.poll(0.05)
                members = _members(bootstrap, group)
                return len(members) == 2 and all(len(m.assignment.topic_partitions[0].partitions) == 2
                                                 for m in members if m.assignment.topic_partitions)
            wait_for(two_members, 60, "the Java and the librdkafka member to share the topic")
            assert {m.client_id.split("-")[0] for m in _members(bootstrap, group)} >= {"console"}
            values = produce(bootstrap, topic, 200, partitions=4)
            seen: dict[bytes, int] = {}
            drain([native], seen, 100, timeout=20)
            java.wait(60)
        finally:
            if java.poll() is None:
                java.kill()
                java.wait(10)
            native.close()
    by_java = (tmp_path / "java.out").read_text().split()
    both = [v.decode() for v in seen] + by_java
    assert len(seen) == 100 and len(by_java) == 100  # two partitions each, 50 messages per partition
    assert sorted(both) == sorted(v.decode() for v in values)  # every message once


def _coordinator_settled(bootstrap: str, group: str, members: int) -> bool:
    """ConsumerGroupDescribe shows `members` members, the group Stable and each member holding its target.

    A client's own assignment changes when the heartbeat answer arrives; the coordinator counts a
    partition as the member's (and the group as Stable) only once a later heartbeat acknowledges it.
    """
    with Wire(bootstrap) as wire:
        found = describe(wire, group)[0]
    return (found.error_code == 0 and found.group_state == "Stable" and len(found.members) == members
            and targets_are_current(found))


def _describe_members(kafka_tools: KafkaTools, bootstrap: str, group: str) -> list[list[str]]:
    shown = kafka_tools.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--members", "--verbose",
                  "--group", group)
    assert shown.code == 0, shown.err
    return [line.split() for line in shown.out.splitlines() if line.strip()]


@pytest.mark.slow
def test_consumer_groups_describe_members_matches_kafka_4_1(
    broker: Broker, kafka41: ReferenceKafka, kafka_tools: KafkaTools,
) -> None:
    """kafka-consumer-groups --describe --members --verbose on a live librdkafka group, here and on Kafka."""
    outputs = []
    for bootstrap in (kafka41.bootstrap_servers, broker.bootstrap_servers):
        topic, group = "described", f"g-{uuid.uuid4().hex[:8]}"
        try:
            create_topic(bootstrap, topic, 4)
        except Exception:  # noqa: BLE001 - the second group on a broker reuses the topic
            pass
        members = [consumer(bootstrap, group, **{"group.instance.id": f"i{i}", "group.remote.assignor": "range",
                                                  "client.id": f"client-{i}"}) for i in range(2)]
        try:
            for c in members:
                c.subscribe([topic])

            def settled() -> bool:
                for c in members:
                    c.poll(0.05)
                return sorted(len(assigned(c)) for c in members) == [2, 2] and _coordinator_settled(bootstrap, group, 2)
            # the tool prints the coordinator's view: it must have taken the members' acknowledgements too
            wait_for(settled, 30, "two members with two partitions each, their targets current")
            rows = _describe_members(kafka_tools, bootstrap, group)
        finally:
            for c in members:
                c.close()
        header, body = rows[0], sorted(rows[1:], key=lambda r: r[2])
        # member ids and epochs differ per run: keep group, instance, host, client, partition count, assignments
        keep = [header.index(c) for c in header if c not in ("CONSUMER-ID", "CURRENT-EPOCH", "TARGET-EPOCH")]
        outputs.append((header, [[row[i] for i in keep if i < len(row)] for row in body]))
        for row in outputs[-1][1]:
            row[0] = "<group>"
    kafka, ours = outputs
    assert ours == kafka


def test_librdkafka_members_rejoin_after_a_broker_restart(tmp_path: Any) -> None:
    """Consumer groups live in memory: after a restart members are told to rejoin and go on consuming."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    first = Broker(data_dir=str(tmp_path), **KIP848_BROKER).start()
    port = first.port
    members: list[Consumer] = []
    try:
        create_topic(first.bootstrap_servers, topic, 4)
        members = [consumer(first.bootstrap_servers, group, **{"enable.auto.commit": "false"}) for _ in range(2)]
        for c in members:
            c.subscribe([topic])
        seen: dict[bytes, int] = {}
        before = produce(first.bootstrap_servers, topic, 40, partitions=4)
        drain(members, seen, len(before))
        assert set(seen) == before
    finally:
        first.stop()
    try:
        with Broker(data_dir=str(tmp_path), port=port, **KIP848_BROKER) as second:
            after = produce(second.bootstrap_servers, topic, 40, partitions=4, start=40)
            later: dict[bytes, int] = {}
            drain(members, later, after, timeout=40)
            assert set(later) >= after  # with no commits they may read the first 40 again, never lose any
            coordinator = second.server.cluster.groups.consumer
            wait_for(lambda: group in coordinator.groups and len(coordinator.groups[group].members) == 2
                     and coordinator.groups[group].state.value == "Stable", 20, "the group to form again")
    finally:
        for c in members:
            c.close()


def test_librdkafka_regex_subscription_is_resolved_by_the_broker(broker: Broker) -> None:
    """librdkafka sends a `^` subscription as subscribed_topic_regex; new matching topics join it."""
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, f"{prefix}-a", 2)
    create_topic(broker.bootstrap_servers, f"other{prefix}", 2)
    c = consumer(broker.bootstrap_servers, group, **{"topic.metadata.refresh.interval.ms": "1000"})
    try:
        c.subscribe([f"^{prefix}-.*"])

        def topics() -> set[str]:
            c.poll(0.05)
            return {tp.topic for tp in c.assignment()}

        wait_for(lambda: topics() == {f"{prefix}-a"}, 20, "the matching topic")
        create_topic(broker.bootstrap_servers, f"{prefix}-b", 1)
        wait_for(lambda: topics() == {f"{prefix}-a", f"{prefix}-b"}, 20, "the new matching topic")
        with Wire(broker.bootstrap_servers) as wire:
            member = describe(wire, group)[0].members[0]
        assert f"^{prefix}-.*" in member.subscribed_topic_regex  # librdkafka wraps each pattern in ( )
    finally:
        c.close()


def _group_state(bootstrap: str, group: str) -> str:
    with Wire(bootstrap) as wire:
        return describe(wire, group)[0].group_state


def _admin_session(kafka_tools: KafkaTools, bootstrap: str) -> list[str]:
    """A consumer group used, left, then reset, trimmed and deleted with kafka-consumer-groups."""
    topic, group = f"adm-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 20, partitions=2)
    c = consumer(bootstrap, group, **{"enable.auto.commit": "false"})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 20 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            got += msg is not None and msg.error() is None
        c.commit(asynchronous=False)
        live_delete = kafka_tools.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group)
    finally:
        c.close()
    # closing sends the leave heartbeat; offsets can be reset only once the coordinator has the group Empty
    wait_for(lambda: _group_state(bootstrap, group) == "Empty", 20, f"{group} to be empty after its member left")
    steps = [  # each prints the outcome per partition or group
        ("--reset-offsets", "--to-offset", "3", "--topic", topic, "--execute"),
        ("--delete-offsets", "--topic", f"{topic}:1"),
        ("--delete",),
    ]
    runs = [live_delete] + [
        kafka_tools.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, *step, "--group", group) for step in steps
    ]
    def normal(text: str) -> list[str]:  # rows come in hash order in Kafka's tool: sort them
        lines = [" ".join(line.split()) for line in text.replace(group, "<group>").replace(topic, "<topic>").splitlines()]
        lines = [line for line in lines if line]
        return lines[:1] + sorted(lines[1:])

    return [" | ".join(normal(run.out)) for run in runs]


@pytest.mark.slow
def test_kafka_consumer_groups_admin_on_a_consumer_group_matches_kafka_4_1(
    broker: Broker, kafka41: ReferenceKafka, kafka_tools: KafkaTools,
) -> None:
    """Delete refused while live, reset and delete offsets once empty, then delete: as on Kafka 4.1."""
    theirs = _admin_session(kafka_tools, kafka41.bootstrap_servers)
    ours = _admin_session(kafka_tools, broker.bootstrap_servers)
    assert ours == theirs
    assert "GroupNotEmptyException" in ours[0] and "successful" in ours[-1]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rolling_upgrade_of_librdkafka_classic_members_to_the_consumer_protocol(broker: Broker, strategy: str) -> None:
    """Classic members (eager or cooperative), then consumer-protocol ones join: one group, shared partitions."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    classic = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                         "partition.assignment.strategy": strategy}) for _ in range(2)]
    upgraded = consumer(bootstrap, group)
    everyone = classic + [upgraded]
    try:
        for c in classic:
            c.subscribe([topic])

        def split(members: list[Consumer], sizes: list[int]) -> Any:
            def check() -> bool:
                for c in members:
                    c.poll(0.05)
                owned = [assigned(c) for c in members]
                return sorted(map(len, owned)) == sizes and set().union(*owned) == set(range(4))
            return check

        wait_for(split(classic, [2, 2]), 30, "the classic group")
        upgraded.subscribe([topic])
        wait_for(split(everyone, [1, 1, 2]), 30, "the classic members and the upgraded one to share")
        with Wire(bootstrap) as wire:
            described = describe(wire, group)[0]
        assert described.error_code == 0 and sorted(m.member_type for m in described.members) == [0, 0, 1]
        values = produce(bootstrap, topic, 80, partitions=4)
        seen: dict[bytes, int] = {}
        drain(everyone, seen, len(values))
        assert set(seen) == values and set(seen.values()) == {1}
        classic[0].close()
        classic[1].close()
        wait_for(split([upgraded], [4]), 30, "the upgraded member to take over every partition")
    finally:
        for c in everyone:
            try:
                c.close()
            except RuntimeError:  # already closed
                pass


@pytest.mark.slow
def test_rolling_upgrade_of_a_java_classic_member_to_the_consumer_protocol(broker: Broker, tmp_path: Any) -> None:
    """A Java 4.1 classic consumer, then a Java consumer-protocol one in the same group: all read once."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    outputs = [tmp_path / "classic.out", tmp_path / "consumer.out"]
    with open(outputs[0], "w") as first_out, open(outputs[1], "w") as second_out:
        # idle long enough to still be there when the second JVM has started and joined
        first = _java_consumer(bootstrap, topic, group, first_out, protocol="classic", idle_ms=45_000)
        second = None
        try:
            with Wire(bootstrap) as wire:
                def classic_group_formed() -> bool:
                    found = describe(wire, group)[0]  # a classic group: "not a consumer group"
                    return found.error_code == 69 and "not a consumer group" in (found.error_message or "")
                wait_for(classic_group_formed, 60, "the Java classic consumer's group")
                second = _java_consumer(bootstrap, topic, group, second_out, protocol="consumer", idle_ms=45_000)

                def mixed() -> bool:
                    found = describe(wire, group)[0]
                    return found.error_code == 0 and found.group_state == "Stable" and sorted(
                        m.member_type for m in found.members) == [0, 1]
                wait_for(mixed, 60, "one classic and one consumer-protocol Java member in a Stable group")
            values = produce(bootstrap, topic, 200, partitions=4)
            wait_for(lambda: sum(len(p.read_text().split()) for p in outputs) >= 200, 60, "all 200 messages read")
            for process in (first, second):
                process.terminate()  # the console consumer's shutdown hook closes it (and leaves the group)
                process.wait(60)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait(10)
    read = [path.read_text().split() for path in outputs]
    assert read[0] and read[1]  # both members read a share
    assert sorted(read[0] + read[1]) == sorted(v.decode() for v in values)


def _group_type(bootstrap: str, group: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer is in
    return admin.describe_consumer_groups([group])[group].result(15).type


@pytest.mark.parametrize("strategy", ["roundrobin", "cooperative-sticky"])
def test_librdkafka_classic_member_joins_a_consumer_group_and_the_group_downgrades_when_it_is_alone(
    broker: Broker, strategy: str,
) -> None:
    """confluent-kafka-python's upgrade/downgrade test, both ways round: a classic member joins a live
    consumer-protocol group (MEMBER_ID_REQUIRED, then a join with that id), the two split the topic,
    and when the consumer-protocol member leaves, the classic one has the group, classic again, to itself."""
    from confluent_kafka import ConsumerGroupType

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    modern = consumer(bootstrap, group)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                        "group.protocol": "classic", "partition.assignment.strategy": strategy,
                        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    members = [modern, classic]

    def split(among: list[Consumer], sizes: list[int]) -> Any:
        def check() -> bool:
            for c in among:
                c.poll(0.05)
            owned = [assigned(c) for c in among]
            return sorted(map(len, owned)) == sizes and set().union(*owned) == set(range(4))
        return check

    try:
        modern.subscribe([topic])
        wait_for(split([modern], [4]), 30, "the consumer-protocol member to own the topic")
        classic.subscribe([topic])
        wait_for(split(members, [2, 2]), 30, "the classic member to join the consumer group and take its half")
        assert _group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        values = produce(bootstrap, topic, 40, partitions=4)
        seen: dict[bytes, int] = {}
        drain(members, seen, len(values))
        assert set(seen) == values and set(seen.values()) == {1}
        modern.close()
        wait_for(split([classic], [4]), 30, "the classic member alone to own every partition")
        assert _group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        more = produce(bootstrap, topic, 20, partitions=4, start=40)
        later: dict[bytes, int] = {}
        drain([classic], later, len(more))
        assert set(later) == more
    finally:
        for c in members:
            try:
                c.close()
            except RuntimeError:  # already closed
                pass


@pytest.mark.slow
def test_java_classic_member_joins_a_live_consumer_protocol_group(broker: Broker, tmp_path: Any) -> None:
    """A Java 4.1 classic consumer joins a group a librdkafka consumer-protocol member formed: both read a share."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    modern = consumer(bootstrap, group)
    modern.subscribe([topic])
    wait_for(lambda: modern.poll(0.05) is None and len(assigned(modern)) == 4, 30, "the consumer-protocol member")
    with open(tmp_path / "classic.out", "w") as out:
        java = _java_consumer(bootstrap, topic, group, out, protocol="classic", idle_ms=20_000)
        try:
            def mixed() -> bool:
                modern.poll(0.05)
                with Wire(bootstrap) as wire:
                    found = describe(wire, group)[0]
                return found.error_code == 0 and found.group_state == "Stable" and sorted(
                    m.member_type for m in found.members) == [0, 1] and len(assigned(modern)) == 2
            wait_for(mixed, 60, "the Java classic member in the consumer group, two partitions each")
            values = produce(bootstrap, topic, 80, partitions=4)
            seen: dict[bytes, int] = {}
            drain([modern], seen, 40, timeout=30)
            wait_for(lambda: len((tmp_path / "classic.out").read_text().split()) >= 40, 60, "the Java member's 40")
        finally:
            java.terminate()
            java.wait(60)
            modern.close()
    by_java = (tmp_path / "classic.out").read_text().split()
    assert sorted([v.decode() for v in seen] + by_java) == sorted(v.decode() for v in values)
