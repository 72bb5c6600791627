"""`kafkacompat group ...` against live consumers of a client no one here wrote (confluent-kafka)."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkacompat.testing import Broker

from .conftest import assert_one_line_error, kafkacompat

# the records' timestamps: an hour ago, so within the default stream's 7-day ttl (older ones a
# retention pass may delete), on a whole second for --to-datetime
BASE_MS = (int(time.time()) - 3600) * 1000


def cli(broker: Broker, *args: str):
    return kafkacompat(*args, "--bootstrap-server", broker.bootstrap_servers)


def rows(text: str) -> list[list[str]]:
    """A table's rows below its header, split at whitespace."""
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


def commit(broker: Broker, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets as an assigned (group-less) consumer does: the group stays Empty."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def join(broker: Broker, group: str, topic: str, client_id: str, members: int = 1) -> list[Consumer]:
    """`members` subscribed consumers, returned once every one of them has its assignment."""
    consumers = [Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": client_id,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
                 for _ in range(members)]
    for consumer in consumers:
        consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.1)
        described = json.loads(cli(broker, "group", "describe", group, "--json").stdout or "{}")
        if described.get("state") == "Stable" and len(described["members"]) == members:
            return consumers
    raise AssertionError(f"group {group} never became stable with {members} members")


@pytest.fixture
def topic(cli_broker: Broker) -> str:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    cli_broker.create_topic(name, partitions=3)
    for partition, count in ((0, 10), (1, 8), (2, 4)):
        for i in range(count):
            cli_broker.produce(name, f"m{i}".encode(), partition=partition, timestamp=BASE_MS + i * 1000)
    return name


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def active(cli_broker: Broker, topic: str, group: str) -> Iterator[list[Consumer]]:
    consumers = join(cli_broker, group, topic, "dashboard", members=1)
    consumers[0].commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    yield consumers
    for consumer in consumers:
        consumer.close()


def test_describe_shows_members_committed_end_and_lag(cli_broker: Broker, topic: str, group: str,
                                                      active: list[Consumer]) -> None:
    done = cli(cli_broker, "group", "describe", group)
    assert done.returncode == 0 and done.stderr == ""
    header, *lines = done.stdout.splitlines()
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                              "HOST", "CLIENT-ID"]
    table = [line.split() for line in lines]
    member = table[0][6]
    assert member.startswith("dashboard-")
    assert table == [[group, topic, "0", "7", "10", "3", member, table[0][7], "dashboard"],
                     [group, topic, "1", "-", "8", "-", member, table[0][7], "dashboard"],
                     [group, topic, "2", "-", "4", "-", member, table[0][7], "dashboard"]]
    members = cli(cli_broker, "group", "describe", group, "--members").stdout
    assert rows(members) == [[group, member, table[0][7], "dashboard", "3"]]
    state = rows(cli(cli_broker, "group", "describe", group, "--state").stdout)
    assert state[0][0] == group and state[0][-2:] == ["Stable", "1"] and state[0][-3] == "range"
    listed = rows(cli(cli_broker, "group", "list").stdout)
    assert [group, "Stable"] in listed


def test_a_member_without_partitions_is_shown_too(cli_broker: Broker, group: str) -> None:
    name = f"one-{uuid.uuid4().hex[:6]}"
    cli_broker.create_topic(name, partitions=1)
    consumers = join(cli_broker, group, name, "pair", members=2)
    try:
        table = rows(cli(cli_broker, "group", "describe", group).stdout)
        assert len(table) == 2
        assert sorted(row[1] for row in table) == ["-", name]
    finally:
        for consumer in consumers:
            consumer.close()


def test_an_empty_group_says_so_and_a_missing_group_is_an_error(cli_broker: Broker, topic: str, group: str) -> None:
    commit(cli_broker, group, topic, {1: 5})
    done = cli(cli_broker, "group", "describe", group)
    assert rows(done.stdout) == [[group, topic, "1", "5", "8", "3", "-", "-", "-"]]
    assert done.stderr == f"Consumer group '{group}' has no active members.\n"
    assert_one_line_error(cli(cli_broker, "group", "describe", "no-such-group"), 1,
                          "consumer group 'no-such-group' does not exist")


def _reset(broker: Broker, group: str, *args: str):
    return cli(broker, "group", "reset-offsets", group, *args)


def test_reset_is_a_dry_run_unless_executed(cli_broker: Broker, topic: str, group: str) -> None:
    commit(cli_broker, group, topic, {0: 5, 1: 5})
    done = _reset(cli_broker, group, "--all-topics", "--to-earliest")
    assert done.returncode == 0
    assert rows(done.stdout) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert done.stderr == "Dry run: nothing was changed; add --execute to reset these offsets.\n"
    assert cli_broker.committed(group, topic) == {0: 5, 1: 5}
    done = _reset(cli_broker, group, "--all-topics", "--to-earliest", "--dry-run")
    assert done.stderr == "" and cli_broker.committed(group, topic) == {0: 5, 1: 5}
    done = _reset(cli_broker, group, "--all-topics", "--to-earliest", "--execute")
    assert (done.returncode, done.stderr) == (0, "")
    assert rows(done.stdout) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert cli_broker.committed(group, topic) == {0: 0, 1: 0}


def _local(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M:%S.000")


RESETS = {
    "to-latest, whole topic": (["--topic", "{topic}", "--to-latest"], {0: 10, 1: 8, 2: 4}),
    "to-offset, clamped to each log": (["--topic", "{topic}", "--to-offset", "6"], {0: 6, 1: 6, 2: 4}),
    "shift-by back": (["--all-topics", "--shift-by", "-3"], {0: 2, 1: 0}),
    "shift-by forward past the end": (["--all-topics", "--shift-by", "100"], {0: 10, 1: 8}),
    "some partitions": (["--topic", "{topic}:1,2", "--to-offset", "2"], {0: 5, 1: 2, 2: 2}),
    "to-datetime, local time": (["--topic", "{topic}", "--to-datetime", _local(BASE_MS + 3000)],
                                {0: 3, 1: 3, 2: 3}),
    "to-datetime, UTC, after the end": (["--topic", "{topic}", "--to-datetime", "2100-01-01T00:00:00Z"],
                                        {0: 10, 1: 8, 2: 4}),
}


@pytest.mark.parametrize("args, expected", RESETS.values(), ids=RESETS.keys())
def test_reset_specifications(cli_broker: Broker, topic: str, group: str, args: list[str],
                              expected: dict[int, int]) -> None:
    commit(cli_broker, group, topic, {0: 5, 1: 1})
    done = _reset(cli_broker, group, *[a.format(topic=topic) for a in args], "--execute")
    assert done.returncode == 0, done.stderr
    assert cli_broker.committed(group, topic) == expected


BAD_RESETS = {
    "no scope": (["--to-earliest"], 2, "give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics"),
    "no specification": (["--all-topics"], 2, "one of the arguments --to-earliest"),
    "two specifications": (["--all-topics", "--to-earliest", "--to-latest"], 2, "not allowed with argument"),
    "dry run and execute": (["--all-topics", "--to-earliest", "--dry-run", "--execute"], 2,
                            "not allowed with argument"),
    "bad datetime": (["--all-topics", "--to-datetime", "yesterday"], 2, "'yesterday' is not a date-time"),
    "bad shift": (["--all-topics", "--shift-by", "two"], 2, "'two' is not a whole number"),
    "unknown topic": (["--topic", "no-such-topic", "--to-earliest"], 1, "topic no-such-topic does not exist"),
    "unknown partition": (["--topic", "{topic}:9", "--to-earliest"], 1, "there is no partition 9"),
    "shift without a committed offset": (["--topic", "{topic}", "--shift-by", "1"], 1,
                                         "cannot shift the offset of {topic}-2"),
}


@pytest.mark.parametrize("args, status, message", BAD_RESETS.values(), ids=BAD_RESETS.keys())
def test_bad_resets_are_one_line_and_change_nothing(cli_broker: Broker, topic: str, group: str, args: list[str],
                                                    status: int, message: str) -> None:
    commit(cli_broker, group, topic, {0: 5, 1: 5})
    done = _reset(cli_broker, group, *[a.format(topic=topic) for a in args], "--execute")
    assert_one_line_error(done, status, message.format(topic=topic))
    assert cli_broker.committed(group, topic) == {0: 5, 1: 5}


def test_an_active_group_is_neither_reset_nor_deleted(cli_broker: Broker, topic: str, group: str,
                                                      active: list[Consumer]) -> None:
    done = _reset(cli_broker, group, "--all-topics", "--to-earliest", "--execute")
    assert_one_line_error(done, 1, f"the group '{group}' is inactive, but the current state is Stable",
                          "stop its consumers first")
    assert_one_line_error(cli(cli_broker, "group", "delete", group), 1, "has active members")
    assert cli_broker.committed(group, topic) == {0: 7}


def test_delete(cli_broker: Broker, topic: str, group: str) -> None:
    commit(cli_broker, group, topic, {0: 1})
    done = cli(cli_broker, "group", "delete", group)
    assert (done.returncode, done.stdout) == (0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
    assert cli_broker.committed(group, topic) == {}
    assert [group, "Empty"] not in rows(cli(cli_broker, "group", "list").stdout)
    assert_one_line_error(cli(cli_broker, "group", "delete", group), 1, f"'{group}' does not exist")


def test_reset_reports_progress_on_stderr_when_asked(cli_broker: Broker, group: str) -> None:
    name = f"wide-{uuid.uuid4().hex[:6]}"
    cli_broker.create_topic(name, partitions=1500)
    done = _reset(cli_broker, group, "--topic", name, "--to-latest", "--execute", "--progress")
    assert done.returncode == 0, done.stderr
    progress = done.stderr.splitlines()
    assert progress[0] == f"resetting offsets of {group}: 1000/1500 (66%)"
    assert progress[-1].startswith(f"resetting offsets of {group}: 1500/1500 (100%) in ")
    assert len(cli_broker.committed(group, name)) == 1500
    quiet = _reset(cli_broker, group, "--topic", name, "--to-earliest", "--execute")
    assert quiet.stderr == "", "no progress when stderr is not a terminal and --progress is not given"


def test_stream_topics_by_canonical_name_with_partitions_and_by_alias(cli_broker: Broker, group: str) -> None:
    stream = f"/apps/g{uuid.uuid4().hex[:6]}"
    name = f"{stream}:Pressure"
    cli_broker.create_topic(name, partitions=2)
    for i in range(5):
        cli_broker.produce(name, b"m", partition=0)
    commit(cli_broker, group, name, {0: 3})
    assert rows(cli(cli_broker, "group", "describe", group).stdout) == [[group, name, "0", "3", "5", "2", "-", "-", "-"]]
    done = _reset(cli_broker, group, "--topic", f"{name}:0", "--to-earliest", "--execute")
    assert rows(done.stdout) == [[group, name, "0", "0"]]
    alias = f"{stream[1:].replace('/', '.')}..Pressure"
    done = _reset(cli_broker, group, "--topic", alias, "--to-latest", "--execute")
    assert rows(done.stdout) == [[group, alias, "0", "5"], [group, alias, "1", "0"]]
    assert cli_broker.committed(group, name) == {0: 5, 1: 0}
