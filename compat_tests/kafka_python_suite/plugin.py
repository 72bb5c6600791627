"""pytest plugin for kafka-python's integration suite: its brokers are kafkacompat brokers.

Loaded with `-p compat_tests.kafka_python_suite.plugin` into a pytest run
whose working directory holds the sdist's test/ tree. kafka-python's
test/integration/fixtures.py starts Apache Kafka from a tarball
(`KafkaFixture`); its conftest's `kafka_broker_factory`, and
test_ssl_integration.py directly, call `KafkaFixture.instance(...)`. Before
any of them is imported this plugin replaces that class in fixtures.py by
`KafkacompatFixture`, which starts an in-process kafkacompat broker set up
as kafka-python's own servers/resources/default/kafka.properties sets up
Kafka: node.id, num.partitions, the listener's transport (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
the one SASL mechanism asked for with the fixture's user, Kafka's
StandardAuthorizer with allow.everyone.if.no.acl.found=true,
group.initial.rebalance.delay.ms=0 and group.min.session.timeout.ms=1000.
Every other fixture (topic, producer, consumer and admin factories, client
parameters with SASL and TLS settings) is kafka-python's own, unchanged, and
so are the tests.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import shutil
import sys
import tempfile
import types
from typing import Any

from kafkacompat.testing import Broker

log = logging.getLogger(__name__)


class BrokerLogs:
    """A fixture's `child`: fixtures.py asks it to dump the broker's logs.

    The broker runs in this process and logs through `logging`, which pytest
    captures and shows with a failing test, so there is nothing more to dump.
    """

    def __init__(self, *_args: object) -> None:
        """fixtures.py would build an ExternalService(host, port): nothing of those is needed."""

    def dump_logs(self) -> None:
        """The broker logs through `logging` in this process: pytest already shows it with a failing test."""


class SpawnedService:
    """fixtures.py's runner of Kafka and ZooKeeper processes, which no kafkacompat run may start."""

    def __init__(self, *_args: object) -> None:
        raise RuntimeError("kafka-python's fixtures tried to start a Kafka or ZooKeeper process; "
                           "the kafkacompat harness serves every broker")


def _install_service_module() -> None:
    """Provide test.service, which fixtures.py imports and the sdist does not ship (MANIFEST.in leaves it out)."""
    service = types.ModuleType("test.service")
    service.ExternalService = BrokerLogs  # type: ignore[attr-defined]
    service.SpawnedService = SpawnedService  # type: ignore[attr-defined]
    sys.modules["test.service"] = service


_install_service_module()

from test.integration import fixtures  # noqa: E402 - needs test.service in place

KafkaFixture: Any = fixtures.KafkaFixture


class KafkacompatFixture(KafkaFixture):  # type: ignore[misc, valid-type]
    """kafka-python's KafkaFixture, its broker a kafkacompat broker instead of a Kafka process."""

    @classmethod
    def instance(cls, broker_id: int, zookeeper: object = None, zk_chroot: object = None,
                 host: str = "localhost", port: int | None = None, external: bool = False,
                 transport: str = "PLAINTEXT", replicas: int = 1, partitions: int = 4,
                 sasl_mechanism: str | None = None, auto_create_topic: bool = True,
                 tmp_dir: Any = None) -> "KafkacompatFixture":
        """KafkaFixture.instance's call: the broker listens on an ephemeral port; ZooKeeper, its chroot,
        an external broker and tmp_dir are concerns of a Kafka process, which none is."""
        fixture = cls(host, broker_id, transport=transport, replicas=replicas, partitions=partitions,
                      sasl_mechanism=sasl_mechanism, auto_create_topic=auto_create_topic)
        fixture.open()
        return fixture

    def __init__(self, host: str, broker_id: int, *, transport: str, replicas: int, partitions: int,
                 sasl_mechanism: str | None, auto_create_topic: bool) -> None:
        # KafkaFixture.__init__ looks for a Kafka tarball and a ZooKeeper; neither is needed
        self.broker: Broker | None = None
        self._ssl_tmp: tempfile.TemporaryDirectory[str] | None = None
        self.external = False
        self.running = False
        self.host = host
        self.port: int | None = None
        self.broker_id = broker_id
        self.transport = transport.upper()
        self.sasl_mechanism = sasl_mechanism.upper() if sasl_mechanism else None
        if self.sasl_enabled != (self.sasl_mechanism is not None):
            raise ValueError(f"transport {self.transport} with sasl_mechanism {self.sasl_mechanism}")
        self.replicas = replicas
        self.partitions = partitions
        self.auto_create_topic = auto_create_topic
        self.zookeeper = None
        self.tmp_dir = None
        self.ssl_dir: str | None = None
        self.child: BrokerLogs | None = None

    def open(self) -> None:
        self.start()

    def start(self) -> bool:
        if self.running:
            return True
        settings: dict[str, Any] = {
            "node_id": self.broker_id,
            "authorizer": True,
            "allow_everyone_if_no_acl_found": True,
            "group_initial_rebalance_delay_ms": 0,
            "group_min_session_timeout_ms": 1000,
            "auto_create_topics": self.auto_create_topic,
        }
        if self.sasl_enabled:
            settings["sasl_enabled_mechanisms"] = [self.sasl_mechanism]
        users = {self.broker_user: self.broker_password} if self.sasl_enabled else None
        self.broker = Broker(sasl=users, tls=self.ssl_enabled, **settings).start()
        self.port = self.broker.port
        self.broker.call(self._set_num_partitions(self.broker, self.partitions))
        if self.ssl_enabled:
            self._publish_ca()
        self.child = BrokerLogs()
        self.running = True
        log.info("kafkacompat broker %s serves %s on port %d", self.broker_id, self.transport, self.port)
        return True

    @staticmethod
    async def _set_num_partitions(broker: Broker, partitions: int) -> None:
        """Kafka's num.partitions (auto-created topics): the default stream's default partitions here."""
        cluster = broker.server.cluster
        assert cluster is not None
        stream = cluster.store.get_stream(cluster.default_stream)
        assert stream is not None
        await cluster.store.edit_stream(cluster.default_stream,
                                        dataclasses.replace(stream.policy, default_partitions=partitions))

    def _publish_ca(self) -> None:
        """Put the broker's CA where kafka-python's fixtures look for it: ssl_dir/ca-cert."""
        assert self.broker is not None and self.broker.certificates is not None
        self._ssl_tmp = tempfile.TemporaryDirectory(prefix="kafka-python-ssl-")
        self.ssl_dir = self._ssl_tmp.name
        shutil.copyfile(self.broker.certificates.location, pathlib.Path(self.ssl_dir, "ca-cert"))

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        self.running = False

    def close(self) -> None:
        self.stop()
        if self._ssl_tmp is not None:
            self._ssl_tmp.cleanup()
            self._ssl_tmp = None

    def dump_logs(self) -> None:
        """The broker logs through `logging` in this process: pytest already shows it with a failing test."""

    def get_topic_names(self) -> list[str]:
        """The topics as `kafka-topics.sh --list` lists them, read from the broker itself."""
        broker = self.broker
        if broker is None:
            raise RuntimeError("the broker is not running")

        async def names() -> list[str]:
            cluster = broker.server.cluster
            assert cluster is not None
            return sorted(cluster.display_name(info) for info in cluster.store.list_topics())

        return broker.call(names())


fixtures.KafkaFixture = KafkacompatFixture
