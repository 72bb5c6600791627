"""Replica links that log in: the source broker's --replication-client-config against a SASL_SSL destination."""

from __future__ import annotations

import pathlib

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdminClient
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from kafkacompat.admin.client import AdminClient
from kafkacompat.security.client import client_security
from kafkacompat.testing import Broker

from .helpers import admin, batches, end_offset, link_state, replica, values, wait_for

USERS = {"admin": "admin-pw", "mirror": "mirror-pw", "stranger": "stranger-pw"}


@pytest.fixture(scope="module")
def destination(tmp_path_factory):
    """A cluster with only a SASL_SSL listener and authorization on; users mirror and latecomer (not yet made)
    hold /s's copy permission."""
    with Broker(str(tmp_path_factory.mktemp("newyork")), cluster_name="newyork", sasl=USERS, tls=True,
                super_users=["User:admin"]) as broker:
        logged_in = AdminClient(broker.bootstrap_servers, timeout=30,
                                security=client_security(_properties(broker, "admin", "admin-pw")))
        logged_in.call("stream.create", path="/s", policy={"permissions": {"copy": "u:mirror | u:latecomer"}})
        yield broker


def _properties(broker: Broker, user: str, password: str, trusted: bool = True) -> dict[str, str]:
    """What a Kafka user has for MirrorMaker's target cluster: Java property names."""
    properties = {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="{user}" password="{password}";',
    }
    if trusted:
        properties.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": broker.certificates.location})
    return properties


def _source(tmp_path: pathlib.Path, name: str, properties: dict[str, str]) -> Broker:
    config = tmp_path / f"{name}.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    broker = Broker(str(tmp_path / name), cluster_name=name, replication_client_config=str(config))
    broker.start()
    admin(broker).call("stream.create", path="/s")
    return broker


def test_link_logs_in_and_copies_byte_for_byte(destination: Broker, tmp_path, caplog) -> None:
    source = _source(tmp_path, "sanjose", _properties(destination, "mirror", "mirror-pw"))
    try:
        for i in range(20):
            source.produce("/s:metrics", f"m{i}".encode())
        admin(source).call("replica.add", path="/s", replica=replica(destination, "/s"))
        wait_for(lambda: [entry for entry in link_state(source, "/s") if entry["state"] == "in-sync"], what="link in sync")
        assert batches(destination, "/s", "metrics") == batches(source, "/s", "metrics")
        source.produce("/s:metrics", b"late")
        wait_for(lambda: end_offset(destination, "/s", "metrics") == 21, what="late message replicated")
        assert batches(destination, "/s", "metrics") == batches(source, "/s", "metrics")
        assert values(source, "/s:metrics")[-1] == (20, b"late")
        [link] = link_state(source, "/s")
        assert link["cluster"] == "newyork" and link["lag_messages"] == 0
        assert "mirror-pw" not in repr(link) and "mirror-pw" not in caplog.text  # the secret stays in its file
    finally:
        source.stop()


@pytest.mark.parametrize("user, password, trusted, reason", [
    ("mirror", "wrong-pw", True, "login to 127.0.0.1:{port} failed: "),
    ("mirror", "mirror-pw", False, "TLS handshake with 127.0.0.1:{port} failed: "),
    ("stranger", "stranger-pw", True, "may not replicate into stream /s"),
], ids=["wrong-password", "untrusted-certificate", "no-copy-permission"])
def test_refused_link_is_broken_and_writes_nothing(destination: Broker, tmp_path, caplog, user: str, password: str,
                                                   trusted: bool, reason: str) -> None:
    source = _source(tmp_path, f"refused-{user}", _properties(destination, user, password, trusted))
    try:
        source.produce("/s:refused", b"never")
        admin(source).call("replica.add", path="/s", replica=replica(destination, "/s"))
        [link] = wait_for(lambda: [entry for entry in link_state(source, "/s") if entry["state"] == "broken"], what="broken link")
        assert reason.format(port=destination.port) in link["reason"], link
        assert end_offset(destination, "/s", "refused") == -1
        logged = [r for r in caplog.records if r.levelname == "ERROR" and "replica /s ->" in r.getMessage()]
        assert len(logged) == 1 and password not in caplog.text
    finally:
        source.stop()


def test_broken_login_retries_and_succeeds_once_the_user_exists(destination: Broker, tmp_path) -> None:
    source = _source(tmp_path, "late", _properties(destination, "latecomer", "late-pw"))
    try:
        for i in range(5):
            source.produce("/s:late", f"l{i}".encode())
        admin(source).call("replica.add", path="/s", replica=replica(destination, "/s"))
        wait_for(lambda: [entry for entry in link_state(source, "/s") if entry["state"] == "broken"], what="broken link")
        assert end_offset(destination, "/s", "late") == -1
        upsertion = UserScramCredentialUpsertion("latecomer", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                 b"late-pw")
        users = KafkaAdminClient(destination.client_config("admin"))  # outlives its futures
        users.alter_user_scram_credentials([upsertion])["latecomer"].result(timeout=10)
        admin(source).call("replica.resume", path="/s", replica=replica(destination, "/s"))  # retry now, not in 30 s
        wait_for(lambda: [entry for entry in link_state(source, "/s") if entry["state"] == "in-sync"], what="link in sync")
        assert batches(destination, "/s", "late") == batches(source, "/s", "late")
    finally:
        source.stop()
