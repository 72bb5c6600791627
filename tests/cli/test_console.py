"""`kafkacompat produce` and `consume` as a user pipes them, checked with a client no one here wrote."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkacompat.testing import Broker

from .conftest import assert_one_line_error, kafkacompat


@pytest.fixture
def topic(cli_broker: Broker) -> str:
    name = f"console-{uuid.uuid4().hex[:8]}"
    cli_broker.create_topic(name, partitions=3)
    return name


def cli(broker: Broker, *args: str, input: str | None = None):
    return kafkacompat(*args, "--bootstrap-server", broker.bootstrap_servers, input=input)


def read_all(broker: Broker, topic: str) -> list:
    """Every message of every partition, read by confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "checker",
                         "enable.auto.commit": False})
    try:
        messages = []
        for partition in range(len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            consumer.assign([TopicPartition(topic, partition, low)])
            while low + sum(1 for m in messages if m.partition() == partition) < high:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None
                messages.append(msg)
        return messages
    finally:
        consumer.close()


def test_produce_sends_one_message_per_line_with_keys_and_headers(cli_broker: Broker, topic: str) -> None:
    done = cli(cli_broker, "produce", topic, "--key-separator", ":", "--header", "source=pump", "--header", "unit=psi",
               input="pump1:1450 psi\npump2:1380:x\r\npump1:1510 psi\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    messages = read_all(cli_broker, topic)
    assert sorted((m.key(), m.value()) for m in messages) == [
        (b"pump1", b"1450 psi"), (b"pump1", b"1510 psi"), (b"pump2", b"1380:x")]
    assert {tuple(m.headers()) for m in messages} == {(("source", b"pump"), ("unit", b"psi"))}
    by_key = {m.key(): m.partition() for m in messages}
    assert len({m.partition() for m in messages if m.key() == b"pump1"}) == 1, "one key, one partition"
    assert by_key  # keyed records are placed by the partitioner, not spread


@pytest.mark.parametrize("compression, acks", [("gzip", "all"), ("snappy", "1"), ("lz4", "0"), ("zstd", "-1")])
def test_produce_to_a_partition_with_each_codec_and_acks(cli_broker: Broker, topic: str, compression: str,
                                                          acks: str) -> None:
    lines = [f"reading {i}" for i in range(50)]
    done = cli(cli_broker, "produce", topic, "--partition", "2", "--compression", compression, "--acks", acks,
               input="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    messages = read_all(cli_broker, topic)
    assert [m.value().decode() for m in messages] == lines
    assert {m.partition() for m in messages} == {2}
    assert all(m.key() is None for m in messages)


def test_consume_prints_one_value_per_line_and_a_group_resumes(cli_broker: Broker, topic: str) -> None:
    for i in range(5):
        cli_broker.produce(topic, f"v{i}".encode(), partition=0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    done = cli(cli_broker, "consume", topic, "--from-beginning", "--max-messages", "3", "--group", group)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "v0\nv1\nv2\n"
    assert done.stderr == "Processed a total of 3 messages\n"
    assert cli_broker.committed(group, topic) == {0: 3}, "exactly what was printed is committed"
    done = cli(cli_broker, "consume", topic, "--from-beginning", "--group", group, "--timeout-ms", "2000")
    assert done.stdout == "v3\nv4\n" and done.returncode == 0
    assert cli_broker.committed(group, topic) == {0: 5}


def test_consume_one_partition_as_a_group_resumes_there(cli_broker: Broker, topic: str) -> None:
    for i in range(4):
        cli_broker.produce(topic, f"p{i}".encode(), partition=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    args = ("consume", topic, "--partition", "2", "--group", group, "--from-beginning", "--max-messages", "2")
    assert cli(cli_broker, *args).stdout == "p0\np1\n"
    assert cli(cli_broker, *args).stdout == "p2\np3\n", "--from-beginning only where the group has no offset"
    assert cli_broker.committed(group, topic) == {2: 4}


def test_consume_without_group_commits_nothing_and_latest_is_the_default(cli_broker: Broker, topic: str) -> None:
    cli_broker.produce(topic, b"old", partition=1)
    done = cli(cli_broker, "consume", topic, "--timeout-ms", "1500")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "Processed a total of 0 messages\n")
    done = cli(cli_broker, "consume", topic, "--from-beginning", "--max-messages", "1")
    assert done.stdout == "old\n"
    assert cli_broker.committed("kafkacompat-console", topic) == {}


def test_consume_format_offset_partition_and_json(cli_broker: Broker, topic: str) -> None:
    at = int(time.time() * 1000) - 60_000  # a minute ago: within the default stream's 7-day ttl
    cli_broker.produce(topic, b"a", partition=1, key=b"k1", headers=[("h", b"1")], timestamp=at)
    cli_broker.produce(topic, b"b", partition=1, timestamp=at + 1)
    cli_broker.produce(topic, b"c", partition=1, key=b"k3", timestamp=at + 2)
    done = cli(cli_broker, "consume", topic, "--partition", "1", "--offset", "1", "--max-messages", "2",
               "--format", r"%t|%p|%o|%k|%v|%h|%d|100%%\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"{topic}|1|1|null|b||{at + 1}|100%\n"
                           f"{topic}|1|2|k3|c||{at + 2}|100%\n")
    done = cli(cli_broker, "consume", topic, "--partition", "1", "--offset", "earliest", "--max-messages", "1", "--json")
    assert json.loads(done.stdout) == {"topic": topic, "partition": 1, "offset": 0, "timestamp": at,
                                       "key": "k1", "value": "a", "headers": [{"key": "h", "value": "1"}]}


def test_stream_topic_names_work(cli_broker: Broker) -> None:
    name = f"/apps/cli{uuid.uuid4().hex[:6]}:Pressure"
    cli_broker.create_topic(name)
    assert cli(cli_broker, "produce", name, input="1450 psi\n").returncode == 0
    done = cli(cli_broker, "consume", name, "--from-beginning", "--max-messages", "1")
    assert done.stdout == "1450 psi\n"


def test_produce_stops_at_a_line_without_the_key_separator(cli_broker: Broker, topic: str) -> None:
    done = cli(cli_broker, "produce", topic, "--key-separator", ":", "--partition", "0", input="a:1\nno key\nb:2\n")
    assert_one_line_error(done, 1, "line 2 has no key separator ':'", "1 earlier message was sent")
    assert [m.value() for m in read_all(cli_broker, topic)] == [b"1"], "as kafka-console-producer: nothing after it"


BAD_PRODUCE = {
    "no such partition": (["--partition", "3"], 1, "topic {topic} has 3 partitions: there is no partition 3"),
    "first line without separator": (["--key-separator", "="], 1, "line 1 has no key separator '='"),
    "empty separator": (["--key-separator", ""], 2, "the key separator may not be empty"),
    "header without value": (["--header", "source"], 2, "'source' is not NAME=VALUE"),
    "bad acks": (["--acks", "2"], 2, "argument --acks: invalid choice: '2'"),
    "bad codec": (["--compression", "brotli"], 2, "argument --compression: invalid choice: 'brotli'"),
    "negative partition": (["--partition", "-1"], 2, "partition numbers start at 0, not -1"),
}


@pytest.mark.parametrize("args, status, message", BAD_PRODUCE.values(), ids=BAD_PRODUCE.keys())
def test_bad_produce_is_one_line_and_sends_nothing(cli_broker: Broker, topic: str, args: list[str], status: int,
                                                   message: str) -> None:
    done = cli(cli_broker, "produce", topic, *args, input="k:v\n")
    assert_one_line_error(done, status, message.format(topic=topic))
    assert read_all(cli_broker, topic) == []


def test_a_bad_bootstrap_address_is_refused_by_every_client_command() -> None:
    for args in (["produce", "t"], ["consume", "t"], ["group", "list"], ["topic", "list"]):
        done = kafkacompat(*args, "--bootstrap-server", "nohostport", input="x\n")
        assert_one_line_error(done, 2, "bootstrap server 'nohostport' is not host:port")
    done = kafkacompat("group", "list", env={"KAFKACOMPAT_BOOTSTRAP_SERVERS": "h:99999"})
    assert_one_line_error(done, 2, "bootstrap server 'h:99999' is not host:port")


BAD_CONSUME = {
    "offset without partition": (["--offset", "3"], 2, "--offset needs --partition"),
    "offset and from-beginning": (["--partition", "0", "--offset", "1", "--from-beginning"], 2,
                                  "give --from-beginning or --offset, not both"),
    "offset not a number": (["--partition", "0", "--offset", "soon"], 2, "'soon' is not an offset"),
    "unknown format directive": (["--format", "%x"], 2, "unknown directive %x"),
    "format and json": (["--format", "%v", "--json"], 2, "not allowed with argument"),
    "zero max messages": (["--max-messages", "0"], 2, "must be at least 1, not 0"),
    "no such partition": (["--partition", "7"], 1, "there is no partition 7"),
}


@pytest.mark.parametrize("args, status, message", BAD_CONSUME.values(), ids=BAD_CONSUME.keys())
def test_bad_consume_is_one_line_and_commits_nothing(cli_broker: Broker, topic: str, args: list[str], status: int,
                                                     message: str) -> None:
    cli_broker.produce(topic, b"x", partition=0)
    done = cli(cli_broker, "consume", topic, "--group", "bad-input", "--timeout-ms", "1000", *args)
    if "--json" in args:  # asked for JSON: the error is one JSON object
        assert (done.returncode, done.stdout) == (status, "")
        assert message in json.loads(done.stderr)["error"]
    else:
        assert_one_line_error(done, status, message)
    assert cli_broker.committed("bad-input", topic) == {}


def test_a_topic_in_a_missing_stream_is_refused(cli_broker: Broker) -> None:
    for args in (["produce", "/no/such:stream"], ["consume", "/no/such:stream"]):
        done = cli(cli_broker, *args, input="x\n")
        assert_one_line_error(done, 1, "topic /no/such:stream is not available")
