"""The pytest plugin's fixtures, used here and from a user's pytest run."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from kafkacompat.testing import Broker

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = pathlib.Path(__file__).with_name("plugin_example.py")


def test_kafka_topic_is_a_fresh_empty_topic(kafka_broker: Broker, kafka_topic: str) -> None:
    assert kafka_broker.consume(kafka_topic) == []
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        metadata = producer.send(kafka_topic, b"v").get(timeout=20)
    finally:
        producer.close(timeout=5)
    assert (metadata.partition, metadata.offset) == (0, 0)
    assert [m.value for m in kafka_broker.consume(kafka_topic)] == [b"v"]


@pytest.mark.kafka_topic(partitions=4, configs={"message.timestamp.type": "LogAppendTime"})
def test_the_marker_shapes_kafka_topic(kafka_broker: Broker, kafka_topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert len(producer.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions) == 4
    assert kafka_broker.produce(kafka_topic, b"v", timestamp=1).timestamp > 1


def test_kafka_broker_is_shared_by_the_session(kafka_broker: Broker, request: pytest.FixtureRequest) -> None:
    assert request.getfixturevalue("kafka_broker") is kafka_broker
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")


def _pytest(tmp_path: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run pytest in tmp_path as a user's project would, with the plugin loaded."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kafkacompat.testing.pytest_plugin", "-p", "no:cacheprovider",
         "-q", "-W", "ignore::DeprecationWarning", *args],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        capture_output=True, text=True, timeout=240,
    )


def _run_example(tmp_path: pathlib.Path, *args: str, storage: str) -> tuple[subprocess.CompletedProcess[str], float]:
    shutil.copy(EXAMPLE, tmp_path / "test_user_code.py")
    started = time.monotonic()
    done = _pytest(tmp_path, "test_user_code.py", *args, EXPECTED_KAFKA_STORAGE=storage)
    return done, time.monotonic() - started


def _passed(done: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"(\d+) passed", done.stdout)
    return int(found.group(1)) if found else 0


EXAMPLE_TESTS = 10


def test_a_user_session_with_three_clients_and_careless_tests(tmp_path: pathlib.Path) -> None:
    done, took = _run_example(tmp_path, storage="memory")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _passed(done) == EXAMPLE_TESTS
    # Clients left open do not hold the session: it ends well within the timeout.
    assert took < 120


@pytest.mark.parametrize("how", ["option", "ini"])
def test_storage_on_disk_by_option_or_ini(tmp_path: pathlib.Path, how: str) -> None:
    if how == "ini":
        (tmp_path / "pytest.ini").write_text("[pytest]\nkafka_storage = disk\n")
        args: tuple[str, ...] = ()
    else:
        args = ("--kafka-storage=disk",)
    done, _ = _run_example(tmp_path, *args, "-k", "storage or kafka_python", storage="disk")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _passed(done) == 2


def test_a_wrong_storage_option_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    done, _ = _run_example(tmp_path, "--kafka-storage=tape", storage="memory")
    assert done.returncode == 4  # pytest's usage error
    assert "invalid choice: 'tape'" in done.stderr


def test_the_docs_examples_pass(tmp_path: pathlib.Path) -> None:
    """The examples of docs/testing.md, each a whole test module, pass as written."""
    page = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    for i, block in enumerate(blocks):
        (tmp_path / f"test_readme_{i}.py").write_text(block)
    done = _pytest(tmp_path, "-o", "asyncio_mode=auto")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _passed(done) == 3


def test_a_project_fixture_named_kafka_broker_is_left_alone(tmp_path: pathlib.Path) -> None:
    """kafka-python's own suite names its broker fixture kafka_broker too: it overrides ours and keeps working."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n"
        "class ProjectBroker:\n"
        "    bootstrap_servers = 'kafka.example.com:9092'\n\n\n"
        "@pytest.fixture\n"
        "def kafka_broker():\n"
        "    return ProjectBroker()\n"
    )
    (tmp_path / "test_project.py").write_text(
        "def test_it_gets_its_own_broker(kafka_broker):\n"
        "    assert kafka_broker.bootstrap_servers == 'kafka.example.com:9092'\n"
    )
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _passed(done) == 1
