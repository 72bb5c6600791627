"""The client commands on secure listeners: --command-config FILE with Kafka client properties."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkacompat.testing import Broker

USERS = {"admin": "admin-pw"}


@pytest.fixture(scope="module")
def broker():
    with Broker(sasl=USERS, tls=True) as running:
        yield running


def properties(broker: Broker, tmp_path, password: str = "admin-pw") -> str:
    """What a Kafka user already has for kafka-topics.sh: Java property names."""
    path = tmp_path / "client.properties"
    path.write_text(
        "# as for Kafka's tools\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={broker.certificates.location}\n"
    )
    return str(path)


def cli(broker: Broker, config: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", broker.bootstrap_servers,
                           "--command-config", config], input=stdin, text=True, capture_output=True, timeout=60)


def test_produce_consume_and_admin_commands_log_in(broker: Broker, tmp_path) -> None:
    config = properties(broker, tmp_path)
    made = cli(broker, config, "stream", "create", "/apps/secure")
    assert made.returncode == 0, made.stderr
    made = cli(broker, config, "topic", "create", "/apps/secure:events", "--partitions", "2")
    assert made.returncode == 0, made.stderr
    sent = cli(broker, config, "produce", "/apps/secure:events", stdin="one\ntwo\n")
    assert sent.returncode == 0, sent.stderr
    read = cli(broker, config, "consume", "/apps/secure:events", "--from-beginning", "--max-messages", "2",
               "--timeout-ms", "10000")
    assert sorted(read.stdout.split()) == ["one", "two"], read.stderr
    groups = cli(broker, config, "group", "list")
    assert groups.returncode == 0, groups.stderr
    replicas = cli(broker, config, "stream", "replica", "list", "--path", "/apps/secure", "--json")
    assert (replicas.returncode, replicas.stdout.strip()) == (0, "[]"), replicas.stderr
    info = cli(broker, config, "cluster", "info")
    assert info.returncode == 0, info.stderr


def test_wrong_password_is_one_line(broker: Broker, tmp_path) -> None:
    config = properties(broker, tmp_path, password="nope")
    listed = cli(broker, config, "topic", "list")
    assert listed.returncode == 1
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in listed.stderr
    assert listed.stderr.count("\n") == 1


def test_unusable_properties_are_named(broker: Broker, tmp_path) -> None:
    path = tmp_path / "jks.properties"
    path.write_text("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n")
    result = cli(broker, str(path), "topic", "list")
    assert result.returncode == 2 and "only PEM files" in result.stderr


def test_a_delegation_token_login_is_refused_by_name(broker: Broker, tmp_path) -> None:
    path = tmp_path / "token.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"id\" "
                    "password=\"hmac\" tokenauth=\"true\";\n")
    result = cli(broker, str(path), "topic", "list")
    assert result.returncode == 2 and "cannot log in with a delegation token" in result.stderr


def test_an_oauthbearer_command_config_is_refused_by_name(broker: Broker, tmp_path) -> None:
    """The broker serves OAUTHBEARER, but the kafkacompat commands have no token source: one line, no traceback."""
    path = tmp_path / "oauth.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n")
    result = cli(broker, str(path), "topic", "list")
    assert result.returncode == 2 and "sasl.mechanism=OAUTHBEARER is not one of PLAIN" in result.stderr
    assert result.stderr.count("\n") == 1
