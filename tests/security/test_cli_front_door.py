"""The command line on a secured broker says what is wrong: a refused login, a TLS listener reached without TLS."""

from __future__ import annotations

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
