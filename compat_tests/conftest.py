"""Fixtures for the compatibility suite and the hook that writes COMPATIBILITY.md on request.

One in-memory broker serves the whole session; scenarios that restart a
broker or need a namespace of their own start their own. Scenarios marked
`on_cluster` also run against three `kafkacompat serve` processes forming
one cluster on PostgreSQL + S3 (moto), started once per session when the
first of them runs: the `target` parameter says which (targets.py). With
`--on-workers` they also run against `kafkacompat serve --workers 2`.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.register_assert_rewrite("compat_tests.reference")  # agree() shows the differing steps

from kafkacompat.testing import Broker  # noqa: E402 - after the rewrite registration
from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args  # noqa: E402
from kafkacompat.testing.services import ServiceUnavailable  # noqa: E402
from kafkacompat.testing.spark import spark  # noqa: E402, F401 - the run's one Spark session (test_pyspark)

from . import matrix  # noqa: E402
from .drivers import CLIENTS, ClientUnavailable, Driver, NotApplicable, build
from .reference import KafkaTools, ReferenceKafka, Side, kafka_tools, reference_kafka  # noqa: F401 - fixtures for every compat test
from .targets import CLUSTER_CLIENTS, ClusterTarget, InProcessTarget, Target, WorkerPorts, WorkersTarget

STREAM = "/apps/iot/oilpump_metrics"
_HERE = Path(__file__).parent


def pytest_addoption(parser: pytest.Parser) -> None:
    matrix.add_option(parser)
    parser.addoption("--on-workers", action="store_true", default=False,
                     help="also run the on_cluster scenarios against `kafkacompat serve --workers 2` "
                          "(not in the matrix)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_tools: Apache Kafka 4.1's CLI tools, against Kafka 4.1 and kafkacompat")
    for name in (*CLIENTS, "spark_java", "pyspark", "kafka_connect"):
        config.addinivalue_line("markers", f"{name}: compatibility scenario run with the {name} client")
    config.addinivalue_line(
        "markers", "differential: the same steps against Apache Kafka 4.1.0 and kafkacompat, compared"
    )
    config.addinivalue_line("markers", "on_cluster: the scenario also runs against a three-broker cluster")
    config.addinivalue_line("markers", "cluster: a scenario's run against the three-broker cluster")
    config.addinivalue_line("markers", "workers: a scenario's run against `serve --workers 2` (--on-workers)")
    config.pluginmanager.register(matrix.MatrixRecorder(config), "compat-matrix")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Scenarios marked on_cluster run once per target; the others on the in-process broker only."""
    if "target" in metafunc.fixturenames and metafunc.definition.get_closest_marker("on_cluster"):
        targets = [
            pytest.param("broker", id="broker"),
            pytest.param("cluster", id="cluster", marks=pytest.mark.cluster),
        ]
        if metafunc.config.getoption("on_workers"):
            targets.append(pytest.param("workers", id="workers", marks=pytest.mark.workers))
        metafunc.parametrize("target", targets, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Stock-client scenarios start JVMs and subprocesses: outside the quick subset.

    A scenario's run against the cluster is kept for the client families of
    targets.CLUSTER_CLIENTS only (the others share their routing code): not
    collected at all, so no run counts as deselected and the matrix stays whole.
    """
    kept = []
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.slow)
            if not _runs_on_the_cluster(item):
                kept.append(item)
        else:
            kept.append(item)
    items[:] = kept


def _runs_on_the_cluster(item: pytest.Item) -> bool:
    """Whether `item` is a cluster run of a client family outside CLUSTER_CLIENTS (not collected)."""
    client = getattr(getattr(item, "callspec", None), "params", {}).get("client_name")
    return (client is not None and client not in CLUSTER_CLIENTS
            and (item.get_closest_marker("cluster") or item.get_closest_marker("workers")) is not None)


def client_params() -> list[object]:
    return [pytest.param(name, marks=getattr(pytest.mark, name), id=name) for name in CLIENTS]


def compat_broker(data_dir: str | None = None, **settings: object) -> Broker:
    """A broker as Kafka's own test setups run one: no initial rebalance delay.

    Kafka waits group.initial.rebalance.delay.ms (3 s) before forming a new
    group; the suite makes dozens of groups, so like Kafka's quickstart test
    containers it sets 0.
    """
    settings.setdefault("group_initial_rebalance_delay_ms", 0)
    return Broker(data_dir=data_dir, **settings)


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    with compat_broker() as running:
        yield running


@pytest.fixture(scope="session")
def cluster() -> Iterator[BrokerCluster]:
    """Three broker processes as one cluster on a PostgreSQL + S3 store, for the whole session."""
    try:
        args = cloud_cluster_args()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(3, args) as running:
        yield running


@pytest.fixture(scope="session")
def workers() -> Iterator[WorkerPorts]:
    """`kafkacompat serve --workers 2` over a disk store of its own, for the whole session."""
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "serve.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(Path(folder) / "data"),
                 "--host", "127.0.0.1", "--port", "0", "--workers", "2", "--group-initial-rebalance-delay-ms", "0"],
                stdout=log, stderr=subprocess.STDOUT, cwd=_HERE.parent)
        try:
            yield WorkerPorts(_serving_ports(proc, log_path))
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, log_path.read_text()


def _serving_ports(proc: subprocess.Popen, log_path: Path) -> list[int]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"workers serving on ports ([\d, ]+)", log_path.read_text())
        if found:
            return [int(port) for port in found.group(1).split(",")]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"serve --workers 2 did not start:\n{log_path.read_text()}")


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """The broker side of a scenario: the session's in-process broker unless parametrized "cluster"
    or "workers"."""
    kind = getattr(request, "param", "broker")
    if kind == "cluster":
        return ClusterTarget(request.getfixturevalue("cluster"))
    if kind == "workers":
        return WorkersTarget(request.getfixturevalue("workers"))
    return InProcessTarget(request.getfixturevalue("broker"))


@pytest.fixture(scope="session")
def differential_broker() -> Iterator[Broker]:
    """The kafkacompat of the differential tests: its own, so topic and group lists hold only what they made."""
    with compat_broker() as broker:
        yield broker


@pytest.fixture(scope="session")
def sides(reference_kafka: ReferenceKafka, differential_broker: Broker, kafka_tools: KafkaTools) -> dict[str, Side]:
    """Kafka 4.1 and kafkacompat, each as a `Side` (same tools, same steps)."""
    matrix.note_version("kafka_tools", "Apache Kafka 4.1.0 tools, vs Kafka 4.1.0")
    return {
        "kafka": Side("kafka", reference_kafka.bootstrap_servers, kafka_tools),
        "kafkacompat": Side("kafkacompat", differential_broker.bootstrap_servers, kafka_tools),
    }


@pytest.fixture
def topic() -> str:
    return f"compat-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def group() -> str:
    return f"group-{uuid.uuid4().hex[:10]}"


_drivers: dict[tuple[str, str], Driver] = {}


def driver_for(name: str, bootstrap: str) -> Driver:
    """A driver of client family `name` talking to `bootstrap` (skips when not installed)."""
    if (name, bootstrap) not in _drivers:
        try:
            _drivers[name, bootstrap] = build(name, bootstrap)
        except ClientUnavailable as exc:
            pytest.skip(f"{name} is not installed: {exc}")
    driver = _drivers[name, bootstrap]
    matrix.note_version(name, driver.version)
    return driver


@pytest.fixture(params=client_params())
def client_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def client(client_name: str, target: Target) -> Driver:
    return driver_for(client_name, target.bootstrap)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> object:
    """A client that has no way to do a scenario at all shows as a skip with the reason."""
    try:
        return (yield)
    except NotApplicable as exc:
        pytest.skip(f"not applicable: {exc}")


def create_topic(broker: Broker, name: str, partitions: int, stream: str | None = None) -> None:
    """Set up a topic the way an operator would, straight in the store."""
    store = broker.server.store
    broker.call(store.create_topic(stream or store.default_stream, name, partitions))
