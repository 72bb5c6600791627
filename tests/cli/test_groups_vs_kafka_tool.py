"""`kafkacompat group` next to Kafka 4.1's own kafka-consumer-groups.sh, both run against the same broker.

Where Kafka's tool defines what a user reads (the describe and reset
tables, group states, the dry-run default), both commands must show the
same rows; whitespace is the only allowed difference.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker

from .test_groups import cli, commit, join, rows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tool() -> Callable[..., subprocess.CompletedProcess[str]]:
    """kafka-consumer-groups.sh against a broker, in the session's warm tool runner
    (compat_tests/reference.py: a JVM start per call cost 2-10 s); skips without Kafka 4.1."""

    def run(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
        return run_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap_servers, *args)

    return run


def table_of(text: str, groups: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """A table's header and its rows about `groups` (Kafka's tool prints one table per group with --all-groups)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = next(line for line in lines if line[0] == "GROUP")
    return header, sorted(line for line in lines if line[0] in groups)


def assert_same_table(ours: str, theirs: str, *groups: str) -> None:
    assert table_of(ours, groups) == table_of(theirs, groups)
    assert table_of(ours, groups)[1], "the tables hold rows to compare"


@pytest.fixture
def scene(cli_broker: Broker) -> Iterator[tuple[str, str, str]]:
    """A three-partition topic; an active group with one member and one commit; an empty group with two commits."""
    topic, active, empty = (f"{kind}-{uuid.uuid4().hex[:6]}" for kind in ("orders", "live", "idle"))
    cli_broker.create_topic(topic, partitions=3)
    for partition, count in ((0, 10), (1, 8), (2, 4)):
        for i in range(count):
            cli_broker.produce(topic, b"m", partition=partition)
    members = join(cli_broker, active, topic, "dashboard")
    members[0].commit(offsets=[TopicPartition(topic, 1, 2)], asynchronous=False)
    commit(cli_broker, empty, topic, {0: 4, 2: 1})
    yield topic, active, empty
    for member in members:
        member.close()


def test_describe_members_state_and_list_read_the_same(cli_broker: Broker, tool, scene) -> None:
    topic, active, empty = scene
    for view in ([], ["--members"], ["--state"]):
        ours = "\n".join(cli(cli_broker, "group", "describe", group, *view).stdout for group in (active, empty))
        theirs = tool(cli_broker, "--describe", "--all-groups", *view)
        assert theirs.returncode == 0, theirs.stderr
        assert_same_table(ours, theirs.stdout, active, empty)
    ours = cli(cli_broker, "group", "list").stdout
    theirs = tool(cli_broker, "--list", "--state").stdout
    assert_same_table(ours, theirs, active, empty)
    assert table_of(ours, (active, empty))[1] == sorted([[active, "Stable"], [empty, "Empty"]])


# the specifications with logic of their own: clamping, shifting, a time after the end
RESETS = (["--to-offset", "6"], ["--shift-by", "-3"], ["--to-datetime", "2100-01-01T00:00:00.000"])


def test_reset_plans_read_the_same_and_kafka_sees_what_we_execute(cli_broker: Broker, tool, scene) -> None:
    topic, active, empty = scene
    for spec in RESETS:
        scope = ["--all-topics"] if spec[0] == "--shift-by" else ["--topic", topic]
        ours = cli(cli_broker, "group", "reset-offsets", empty, *scope, *spec)
        theirs = tool(cli_broker, "--reset-offsets", "--group", empty, *scope, *spec, "--dry-run")
        assert ours.returncode == 0, ours.stderr
        assert_same_table(ours.stdout, theirs.stdout, empty)
    assert cli_broker.committed(empty, topic) == {0: 4, 2: 1}, "dry runs change nothing"
    done = cli(cli_broker, "group", "reset-offsets", empty, "--topic", f"{topic}:0,1", "--to-offset", "5", "--execute")
    assert done.returncode == 0
    _, theirs = table_of(tool(cli_broker, "--describe", "--group", empty).stdout, (empty,))
    assert sorted((r[1], r[2], r[3]) for r in theirs) == [(topic, "0", "5"), (topic, "1", "5"), (topic, "2", "1")]
    # an active group: both refuse, naming the state
    ours = cli(cli_broker, "group", "reset-offsets", active, "--all-topics", "--to-earliest", "--execute")
    theirs = tool(cli_broker, "--reset-offsets", "--group", active, "--all-topics", "--to-earliest", "--execute")
    assert "inactive, but the current state is Stable" in ours.stderr
    assert "inactive, but the current state is Stable" in theirs.stdout + theirs.stderr


def test_a_group_reset_by_kafka_s_tool_is_described_alike(cli_broker: Broker, tool, scene) -> None:
    topic, _active, empty = scene
    done = tool(cli_broker, "--reset-offsets", "--group", empty, "--topic", topic, "--to-latest", "--execute")
    assert done.returncode == 0, done.stderr
    ours = cli(cli_broker, "group", "describe", empty)
    assert sorted((r[1], r[2], r[3], r[5]) for r in rows(ours.stdout)) == [
        (topic, "0", "10", "0"), (topic, "1", "8", "0"), (topic, "2", "4", "0")]
    consumer = Consumer({"bootstrap.servers": cli_broker.bootstrap_servers, "group.id": empty})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == [10, 8, 4]
