"""The command line on a secured broker says what is wrong: a refused login, a TLS listener reached without TLS."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

USERS = {"admin": "admin-pw"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(sasl=USERS, tls=True) as running:
        yield running


def cli(broker: Broker, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", broker.bootstrap_servers,
                           "--command-config", config], text=True, capture_output=True, timeout=60)


def test_a_wrong_password_says_authentication_failed(broker: Broker, tmp_path) -> None:
    path = tmp_path / "wrong.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" "
                    f"password=\"nope\";\nssl.truststore.type=PEM\nssl.truststore.location="
                    f"{broker.certificates.location}\n")
    listed = cli(broker, str(path), "topic", "list")
    assert listed.returncode == 1 and listed.stderr.count("\n") == 1, listed.stderr
    assert "authentication failed" in listed.stderr and "cannot reach" not in listed.stderr


def test_a_plaintext_client_on_a_tls_listener_is_told_tls_is_expected(broker: Broker, tmp_path) -> None:
    path = tmp_path / "plain.properties"
    path.write_text("security.protocol=PLAINTEXT\n")
    listed = cli(broker, str(path), "topic", "list")
    assert listed.returncode == 1 and listed.stderr.count("\n") == 1, listed.stderr
    assert "expects TLS" in listed.stderr and "security.protocol=SSL" in listed.stderr


def test_consume_without_a_group_needs_only_the_topics_read_permission(tmp_path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """As kcat: a user allowed to read a topic and no group reads it; the broker sees no group at all."""
    from confluent_kafka import Producer

    from kafkacompat.security import acls

    users = {"admin": "admin-pw", "reader": "reader-pw"}
    with Broker(sasl=users, authorizer=True, super_users=["User:admin"]) as secured:
        secured.create_topic("readable", partitions=2)
        producer = Producer({**secured.client_config("admin"), "linger.ms": 0})
        for n in range(6):
            producer.produce("readable", f"m{n}".encode(), partition=n % 2)
        assert producer.flush(15) == 0
        secured.call(secured.server.cluster.authorizer.acls.add([acls.AclBinding(
            acls.ResourceType.TOPIC, "readable", acls.PatternType.LITERAL, "User:reader", "*", acls.Operation.READ,
            acls.Permission.ALLOW)]))
        path = tmp_path / "reader.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"reader\" "
                        "password=\"reader-pw\";\n")
        with caplog.at_level(logging.INFO, logger="kafkacompat.audit"):
            read = cli(secured, str(path), "consume", "readable", "--from-beginning", "--max-messages", "6",
                       "--timeout-ms", "10000")
            one = cli(secured, str(path), "consume", "readable", "--partition", "1", "--offset", "1",
                      "--max-messages", "1", "--timeout-ms", "10000")
        assert read.returncode == 0, read.stderr
        assert sorted(read.stdout.split()) == [f"m{n}" for n in range(6)]
        assert (one.returncode, one.stdout) == (0, "m3\n"), one.stderr
        assert not [r.getMessage() for r in caplog.records if "denied" in r.getMessage()]
        assert not any("GROUP" in r.getMessage() for r in caplog.records)
