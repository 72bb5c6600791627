"""Shared fixtures: a real broker per test module, in memory, on loopback."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

# tests/groups and tests/parity import compat_tests.reference (its Kafka 4.1 and tools) before
# compat_tests/conftest.py registers it: registered here too, agree() keeps showing the differing steps
pytest.register_assert_rewrite("compat_tests.reference")

from compat_tests.reference import stop_session_tools  # noqa: E402 - after the rewrite registration
from kafkacompat.testing import Broker  # noqa: E402
from kafkacompat.testing.services import (  # noqa: E402
    TEST_STORE_VARIABLE,
    ServiceUnavailable,
    cloud_store,
    test_store_engine,
)

# The plugin users get by entry point once kafkacompat is installed; named
# here too so the suite runs from a checkout that is not pip-installed.
pytest_plugins = ["kafkacompat.testing.pytest_plugin"]

ALSO_ON_CLOUD = "also_on_cloud"


@pytest.fixture(scope="module", autouse=True)
def _kafka_tools_end_with_the_module() -> Iterator[None]:
    """Kafka's tools run in one warm JVM shared with compat_tests; the brokers of a module here stop
    with it, so that JVM does too (a client a tool left behind would log warnings into later output)."""
    yield
    stop_session_tools()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{ALSO_ON_CLOUD}: the test runs against the module's broker on the default engine and again on "
        "the cloud engine (PostgreSQL + S3): the subset CI runs on both; KAFKACOMPAT_TEST_STORE=cloud runs every test there"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked also_on_cloud take the module's `broker` once per engine (one broker per engine and module)."""
    if ("broker" in metafunc.fixturenames and metafunc.definition.get_closest_marker(ALSO_ON_CLOUD)
            and test_store_engine() == "memory"):
        metafunc.parametrize("broker", ["memory", "cloud"], indirect=True, scope="module")


def module_broker(request: pytest.FixtureRequest, **settings: object) -> Iterator[Broker]:
    """The body of a module's `broker` fixture: in memory (or as KAFKACOMPAT_TEST_STORE says), or on
    a fresh cloud store when parametrized "cloud" (skipped where PostgreSQL or moto is missing)."""
    with pytest.MonkeyPatch.context() as env:
        if getattr(request, "param", "memory") == "cloud":
            try:
                cloud_store()  # starts PostgreSQL and moto once per session
            except ServiceUnavailable as exc:
                pytest.skip(str(exc))
            env.setenv(TEST_STORE_VARIABLE, "cloud")  # read as the broker is made: a fresh database and prefix
        running = Broker(**settings)
    with running:
        yield running


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    yield from module_broker(request)


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    """Create a topic the way users do: through the Admin API; return once Metadata shows it led.

    Kafka answers CreateTopics once its controller has committed the topic; the broker's
    metadata cache learns of it a moment later, and until then Produce, Metadata and
    DescribeTopicPartitions answer UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER.
    Waiting here (as Kafka's own TestUtils.createTopic does) keeps that race out of every
    comparison that starts with a fresh topic.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    futures[name].result(timeout=15)
    wait_until_led(admin, name, partitions)
    return name


def wait_until_led(admin: object, name: str, partitions: int, timeout: float = 15.0) -> None:
    """Poll Metadata until `name` shows `partitions` partitions, each with a leader; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic=name, timeout=5).topics.get(name)  # type: ignore[attr-defined]
        if (found is not None and found.error is None and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values())):
            return
        assert time.monotonic() < deadline, f"{name} had no leader for each of {partitions} partitions within {timeout}s"
        time.sleep(0.1)


@pytest.fixture
def topic(broker: Broker, topic_name: str) -> str:
    """A fresh single-partition topic on the module's broker."""
    return create_topic(broker.bootstrap_servers, topic_name)
