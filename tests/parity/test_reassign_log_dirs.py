"""Moving a partition between log dirs with Kafka 4.1's own tools, on kafkacompat and on Kafka 4.1 alike.

Both brokers have two log dirs (kafkacompat: two volumes). The same steps
run on each: `kafka-reassign-partitions --execute` with a reassignment
file naming a log dir (it calls AlterReplicaLogDirs) and a move throttle,
`--verify` until the move is done (it then clears the throttle), `kafka-log-dirs --describe`, a consumer reading everything
back, and AlterReplicaLogDirs' errors at the wire. What the user sees is
compared with the dir paths replaced by their role (current, target).
"""

from __future__ import annotations

import json
import pathlib
import time
import uuid
from collections.abc import Iterator

import kio.schema.alter_replica_log_dirs.v2.request as arld
import kio.schema.describe_log_dirs.v4.request as dld
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka
from tests.conftest import create_topic
from tests.wire import Wire

TOPIC = f"dirs-{uuid.uuid4().hex[:6]}"
RECORDS = 100


@pytest.fixture(scope="module")
def kafka_two_dirs(tmp_path_factory: pytest.TempPathFactory, kafka41: ReferenceKafka) -> Iterator[tuple[str, list[str]]]:
    """A Kafka 4.1 with two log.dirs (kafka41 is asked for first so that it skips when Kafka is absent)."""
    root = tmp_path_factory.mktemp("kafka-dirs")
    dirs = [str(root / "one"), str(root / "two")]
    with ReferenceKafka(**{"log.dirs": ",".join(dirs)}) as kafka:
        yield kafka.bootstrap_servers, dirs


@pytest.fixture(scope="module")
def ours_two_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    root = tmp_path_factory.mktemp("ours-dirs")
    dirs = [str(root / "one"), str(root / "two")]
    with Broker(data_dir=dirs[0], volumes=[dirs[1]]) as broker:
        yield broker.bootstrap_servers, dirs


def _dir_of(bootstrap: str, partition: int) -> list[tuple[str, bool]]:
    with Wire(bootstrap) as wire:
        answer = wire.request(35, 4, make(dld.DescribeLogDirsRequest, topics=(
            make(dld.DescribableLogDirTopic, topic=TOPIC, partitions=(partition,)),)))
    return [(r.log_dir, p.is_future_key) for r in answer.results for t in r.topics for p in t.partitions]


def _wire_errors(bootstrap: str, dirs: list[str]) -> list[tuple[str, int, str]]:
    with Wire(bootstrap) as wire:
        answer = wire.request(34, 2, make(arld.AlterReplicaLogDirsRequest, dirs=(
            make(arld.AlterReplicaLogDir, path="/no/such/dir", topics=(
                make(arld.AlterReplicaLogDirTopic, name=TOPIC, partitions=(1,)),)),
            make(arld.AlterReplicaLogDir, path=dirs[0], topics=(
                make(arld.AlterReplicaLogDirTopic, name=TOPIC, partitions=(9,)),
                make(arld.AlterReplicaLogDirTopic, name="no-such-topic", partitions=(0,)))))))
    return sorted((t.topic_name, p.partition_index, p.error_code.name) for t in answer.results for p in t.partitions)


def _run(bootstrap: str, dirs: list[str], work: pathlib.Path) -> dict[str, object]:
    """The user's steps on one broker; what they saw, with dir paths replaced by their role."""
    create_topic(bootstrap, TOPIC, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, b"%03d" % i, partition=0)
    assert producer.flush(30) == 0
    [(current, _)] = _dir_of(bootstrap, 0)
    target = next(d for d in dirs if d != current)
    roles = {target: "<target>", current: "<current>"}

    def plain(text: str) -> str:
        for path, role in roles.items():
            text = text.replace(path, role)
        return text

    plan = work / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
    tool = ("--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan))
    execute = run_tool("kafka-reassign-partitions", *tool, "--execute", "--replica-alter-log-dirs-throttle", "50000000")
    assert execute.returncode == 0, execute.stdout + execute.stderr
    deadline = time.monotonic() + 60
    while True:
        verify = run_tool("kafka-reassign-partitions", *tool, "--verify")
        if "completed successfully" in verify.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # a verify is quick in the warm tool runner
    described = run_tool("kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", TOPIC)
    assert described.returncode == 0, described.stderr
    report = json.loads(described.stdout.splitlines()[-1])
    # partition 0 only: where a new partition starts is each broker's own choice
    placement = sorted((plain(d["logDir"]), p["isFuture"], p["size"] > 0) for b in report["brokers"]
                       for d in b["logDirs"] for p in d["partitions"] if p["partition"] == f"{TOPIC}-0")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dirs", "enable.partition.eof": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    until = time.monotonic() + 30
    while len(values) < RECORDS and time.monotonic() < until:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return {
        "execute": plain(execute.stdout).splitlines(),
        "verify": (verify.returncode, plain(verify.stdout).splitlines()),
        "placement": placement,
        "read back": values == [b"%03d" % i for i in range(RECORDS)],
        "errors": _wire_errors(bootstrap, dirs),
    }


def test_kafka_reassign_partitions_moves_a_partition_between_log_dirs_as_on_kafka(
        ours_two_dirs: tuple[str, list[str]], kafka_two_dirs: tuple[str, list[str]],
        tmp_path: pathlib.Path) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "kafka").mkdir()
    ours = _run(*ours_two_dirs, tmp_path / "ours")
    kafka = _run(*kafka_two_dirs, tmp_path / "kafka")
    assert ours == kafka
    assert kafka["read back"] and kafka["placement"] == [("<target>", False, True)]
