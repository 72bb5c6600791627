"""kill -9 of a share-partition's leader: its successor goes on from the acknowledged state.

Three brokers on one PostgreSQL + S3 store. The Java 4.1 KafkaShareConsumer
(compat_tests/java/ShareGroups.java `failover`) takes six records of a
one-partition topic and accepts the first three; the test then kills the
partition's leader with kill -9, and another member of the group reads on
through the brokers left. As on Kafka, where the share-partition lives with
the partition's leader and its state in __share_group_state, the broker
that takes the partition over reads the share-partition from the store: the
accepted records are never delivered again, the three held by the dead
leader's member come back (their delivery counted).
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from typing import IO

import pytest
from confluent_kafka.admin import AdminClient

from compat_tests.test_share_groups_java import _program
from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable

pytestmark = [pytest.mark.slow, pytest.mark.java, pytest.mark.timeout(300)]

RECORDS = 6


@pytest.fixture
def cluster() -> Iterator[BrokerCluster]:
    try:
        args = cloud_cluster_args()  # a fresh database and key prefix; AWS_* in os.environ
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(3, args) as running:
        yield running


def _json_lines(stream: IO[str]) -> "queue.Queue[str]":
    """The JSON lines the program prints, as they come (a thread reads them, so waits have timeouts)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            if line.startswith("{"):
                lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _leader(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return metadata.topics[topic].partitions[0].leader


def test_kill_9_of_the_leader_keeps_acknowledged_records_done(cluster: BrokerCluster) -> None:
    name = f"share-failover-{uuid.uuid4().hex[:8]}"
    argv = [*_program(), "failover", cluster.bootstrap, f"topic={name}", f"group={name}", f"records={RECORDS}"]
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True) as program:
        try:
            lines = _json_lines(program.stdout)
            try:
                held = json.loads(lines.get(timeout=120))
            except queue.Empty:
                errors.seek(0)
                raise AssertionError(f"the first member read nothing:\n{errors.read()[-4000:]}") from None
            assert held == {"held": [f"v{i}@{i}#1" for i in range(RECORDS)], "commit": ["ok"]}
            leader = _leader(cluster.bootstrap, name)
            cluster.broker(leader).kill()
            program.stdin.write("go\n")
            program.stdin.flush()
            try:
                after = json.loads(lines.get(timeout=150))["after_failover"]
            except queue.Empty:
                errors.seek(0)
                raise AssertionError(f"no member read after the failover:\n{errors.read()[-4000:]}") from None
        finally:
            if program.poll() is None:
                program.kill()
    print(f"\nleader {leader} killed; read after the failover: {after}")
    # the three accepted never again; the three held on the dead leader back, each once, counted as delivered again
    assert sorted(r.split("#")[0] for r in after) == [f"v{i}@{i}" for i in range(RECORDS // 2, RECORDS)]
    assert all(int(r.split("#")[1]) >= 2 for r in after)
