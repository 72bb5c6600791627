"""pytest fixtures for testing code against a real Kafka broker in the test process.

Installed with kafkacompat (entry point `pytest11`); without installing, load
it with `pytest -p kafkacompat.testing.pytest_plugin`.

    def test_orders(kafka_broker, kafka_topic):
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
        producer.send(kafka_topic, b"paid").get(timeout=10)
        assert [m.value for m in kafka_broker.consume(kafka_topic)] == [b"paid"]

`kafka_broker` is one broker for the whole session (in memory, or on disk
with `--kafka-storage=disk` or `kafka_storage = disk` in the ini file; on a
secure listener with `--kafka-security=SASL_SSL` or `kafka_security`, and
then `kafka_broker.client_config()` holds the client settings); its
faults are cleared after each test that used it. `kafka_topic` is a fresh
topic per test; `@pytest.mark.kafka_topic(partitions=3, configs={...})`
shapes it. This module imports nothing heavy until a fixture is used, so
test sessions that never touch Kafka pay nothing for it.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kafkacompat.testing import Broker

_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")
SECURITY = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_USER = "test-user"  # its password is made per session; kafka_broker.client_config() carries it


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkacompat", "kafkacompat test broker")
    group.addoption(
        "--kafka-storage",
        choices=("memory", "disk"),
        default=None,
        help="where the session's kafka_broker keeps data (default: memory)",
    )
    parser.addini("kafka_storage", "memory or disk: where kafka_broker keeps data", default="memory")
    group.addoption(
        "--kafka-security",
        choices=SECURITY,
        default=None,
        help="the session kafka_broker's listener (default: PLAINTEXT); connect with kafka_broker.client_config()",
    )
    parser.addini("kafka_security", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: kafka_broker's listener",
                  default="PLAINTEXT")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_topic(partitions=1, configs=None): how the kafka_topic fixture creates this test's topic",
    )


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator["Broker"]:
    """A real broker on an ephemeral loopback port, shared by the session."""
    from kafkacompat.testing import Broker

    storage = request.config.getoption("kafka_storage") or request.config.getini("kafka_storage")
    if storage not in ("memory", "disk"):
        raise pytest.UsageError(f"kafka_storage must be memory or disk, not {storage!r}")
    security = (request.config.getoption("kafka_security") or request.config.getini("kafka_security")).upper()
    if security not in SECURITY:
        raise pytest.UsageError(f"kafka_security must be one of {', '.join(SECURITY)}, not {security!r}")
    sasl = {SASL_USER: uuid.uuid4().hex} if security.startswith("SASL_") else None
    with Broker(data_dir="tmp" if storage == "disk" else None, sasl=sasl, tls=security.endswith("SSL")) as broker:
        yield broker


@pytest.fixture
def kafka_topic(kafka_broker: "Broker", request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of a topic created for this test alone, deleted after it."""
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker is not None else {}
    partitions = options.pop("partitions", 1)
    configs = options.pop("configs", None)
    if options:
        raise pytest.UsageError(f"kafka_topic marker: unknown options {sorted(options)}")
    stem = _UNSAFE.sub("-", request.node.name).strip("-.")[:200] or "topic"
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=partitions, configs=configs)
    yield name
    from kafkacompat.storage import UnknownTopicError

    try:
        kafka_broker.delete_topic(name)
    except UnknownTopicError:
        pass  # the test deleted it itself


@pytest.fixture(autouse=True)
def _kafka_clear_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """Faults a test set on the session broker must not leak into the next test.

    A project's own fixture may also be named `kafka_broker` (kafka-python's
    test suite has one) and override this plugin's: only a kafkacompat broker
    has faults to clear.
    """
    broker = request.getfixturevalue("kafka_broker") if "kafka_broker" in request.fixturenames else None
    yield
    testing = sys.modules.get("kafkacompat.testing")  # never imported: the broker is not ours
    if testing is not None and isinstance(broker, testing.Broker):
        broker.faults.clear()
