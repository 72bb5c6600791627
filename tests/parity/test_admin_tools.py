"""Kafka 4.1's kafka-log-dirs and kafka-transactions describe-producers against kafkacompat."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from compat_tests.reference import run_tool, unique
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import unavailable
from tests.conftest import create_topic


@pytest.fixture(autouse=True)
def _kafka_tools() -> None:
    if unavailable():
        pytest.skip(unavailable())


def test_kafka_log_dirs_describes_the_volumes(ours: Broker) -> None:
    topic = create_topic(ours.bootstrap_servers, "log-dirs-shown", 2)
    producer = Producer({"bootstrap.servers": ours.bootstrap_servers})
    producer.produce(topic, b"x" * 500, partition=1)
    assert producer.flush(10) == 0
    done = run_tool("kafka-log-dirs", "--bootstrap-server", ours.bootstrap_servers, "--describe", "--topic-list", topic)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    [broker] = report["brokers"]
    [log_dir] = broker["logDirs"]
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert broker["broker"] == 1 and log_dir["error"] is None and log_dir["logDir"] == ours.config.data_dir
    assert sizes[f"{topic}-0"] == 0 and sizes[f"{topic}-1"] > 500


def test_kafka_transactions_describes_idempotent_producers(ours: Broker) -> None:
    topic = create_topic(ours.bootstrap_servers, "producers-shown")
    producer = Producer({"bootstrap.servers": ours.bootstrap_servers, "enable.idempotence": True})
    stamp = int(time.time()) * 1000 + 123  # recent: the store keeps 7 days and `ours` runs retention passes
    producer.produce(topic, b"v", timestamp=stamp)
    assert producer.flush(10) == 0
    done = run_tool("kafka-transactions", "--bootstrap-server", ours.bootstrap_servers, "describe-producers",
                    "--topic", topic, "--partition", "0")
    assert done.returncode == 0, done.stderr
    header, row = [line.split() for line in done.stdout.splitlines()]
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    assert row[1:] == ["0", "-1", "0", str(stamp), "None"]


def _producer_once_markers_are_written(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[str, str]:
    """describe-producers for partition 0 once it shows no open transaction, or as it stands after `timeout`.

    EndTxn answers before the coordinator has written the commit markers (Kafka writes them
    in the background), so right after commit_transaction the partition may still show the
    transaction open and no coordinator epoch.
    """
    deadline = time.monotonic() + timeout
    while True:
        done = run_tool("kafka-transactions", "--bootstrap-server", bootstrap, "describe-producers",
                        "--topic", topic, "--partition", "0")
        assert done.returncode == 0, done.stderr
        header, row = [line.split() for line in done.stdout.splitlines()]
        cols = dict(zip(header, row))
        if cols["CurrentTransactionStartOffset"] == "None" or time.monotonic() > deadline:
            return cols
        time.sleep(0.5)


def test_describe_producers_after_a_commit_shows_what_kafka_shows(ours: Broker, kafka41) -> None:
    """Epoch, coordinator epoch (from the marker), last sequence and open transaction, side by side."""
    seen = {}
    name_used_on_both = unique("producers-after-commit")  # a reused reference keeps old topics and ids
    for name, bootstrap in (("kafkacompat", ours.bootstrap_servers), ("kafka", kafka41.bootstrap_servers)):
        topic = create_topic(bootstrap, name_used_on_both)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"v")
        producer.commit_transaction(30)
        cols = _producer_once_markers_are_written(bootstrap, topic)
        seen[name] = {key: cols[key] for key in ("ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                                 "CurrentTransactionStartOffset")}
    assert seen["kafkacompat"] == seen["kafka"]
    assert seen["kafka"]["LatestCoordinatorEpoch"] != "-1"  # the marker's epoch, not "none yet"


def test_kafka_configs_sets_and_describes_client_and_user_quotas(ours: Broker) -> None:
    server = ("--bootstrap-server", ours.bootstrap_servers)
    done = run_tool("kafka-configs", *server, "--alter", "--entity-type", "clients", "--entity-name", "metered",
                    "--add-config", "producer_byte_rate=100000,consumer_byte_rate=200000")
    assert done.returncode == 0, done.stderr
    done = run_tool("kafka-configs", *server, "--describe", "--entity-type", "clients", "--entity-name", "metered")
    assert done.stdout.strip() == (
        "Quota configs for client-id 'metered' are consumer_byte_rate=200000.0, producer_byte_rate=100000.0")
