"""TLS listeners: clients with the CA connect; bad certificates and bad handshakes cost one connection and a log line."""

from __future__ import annotations

import logging
import socket
import ssl
import tempfile
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from kafkacompat.testing.certificates import CertificateAuthority
from tests.security.test_sasl import USERS, produce_and_consume
from tests.wire import Wire, request_class

AUDIT = "kafkacompat.audit"
TLS_LOG = "kafkacompat.security.tls"


@pytest.fixture(scope="module")
def mtls():
    """SSL with client certificates required (mapped to principals) beside SASL_SSL, one CA."""
    with Broker(tls=True, sasl=USERS, ssl_client_auth="required",
                listeners=["SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"],
                ssl_principal_mapping_rules="RULE:^CN=([^,]+),OU=apps,.*$/$1/L,RULE:^CN=admin,.*$/root/") as broker:
        yield broker


def client_certificate(broker: Broker, name: str, subject: dict[str, str], **kwargs) -> dict[str, str]:
    assert broker.certificates is not None
    issued = broker.certificates.issue(name, subject, **kwargs)
    return {"ssl.certificate.location": issued.certificate, "ssl.key.location": issued.key}


def ssl_config(broker: Broker) -> dict[str, str]:
    assert broker.certificates is not None
    return {"bootstrap.servers": f"127.0.0.1:{broker.server.listener_port('SSL')}", "security.protocol": "SSL",
            "ssl.ca.location": broker.certificates.location}


def test_ssl_without_client_auth_produces_and_consumes() -> None:
    with Broker(tls=True) as broker:
        assert broker.security_protocol == "SSL"
        assert produce_and_consume(broker.client_config(), f"tls-{uuid.uuid4().hex[:6]}") == [b"hello"]


def test_sasl_ssl_with_scram_and_plain(mtls: Broker) -> None:
    sasl_ssl = {**mtls.client_config(listener="SASL_SSL"),
                **client_certificate(mtls, "sasl-client", {"CN": "sasl-client", "OU": "apps", "O": "Acme"})}
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        config = {**sasl_ssl, "sasl.mechanism": mechanism}
        assert produce_and_consume(config, f"sasl-ssl-{uuid.uuid4().hex[:6]}") == [b"hello"]


def test_client_certificate_subject_becomes_the_principal(mtls: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    config = {**ssl_config(mtls), **client_certificate(mtls, "carol", {"CN": "Carol", "OU": "apps", "O": "Acme"})}
    assert produce_and_consume(config, f"mtls-{uuid.uuid4().hex[:6]}") == [b"hello"]
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT]
    assert any("authenticated: principal=User:carol" in line and "listener=SSL" in line for line in lines)
    config = {**ssl_config(mtls), **client_certificate(mtls, "admin", {"CN": "admin", "O": "Acme"})}
    Producer(config).list_topics(timeout=10)
    assert any("principal=User:root" in r.getMessage() for r in caplog.records if r.name == AUDIT)


def refused(config: dict[str, str]) -> list[KafkaError]:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.poll(3)
    return errors


def assert_still_serving(broker: Broker) -> None:
    config = {**ssl_config(broker), **client_certificate(broker, "ok", {"CN": "ok", "OU": "apps", "O": "Acme"})}
    assert Producer(config).list_topics(timeout=10).brokers


def tls_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]


def test_no_client_certificate_is_refused(mtls: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assert refused(ssl_config(mtls))
    wait_for(lambda: tls_failures(caplog))
    assert_still_serving(mtls)


def test_untrusted_and_expired_certificates_are_refused(mtls: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with tempfile.TemporaryDirectory() as other:
        stranger = CertificateAuthority(other, "another CA").issue("mallory", {"CN": "mallory", "OU": "apps"})
        assert refused({**ssl_config(mtls), "ssl.certificate.location": stranger.certificate,
                        "ssl.key.location": stranger.key})
    wait_for(lambda: any("certificate refused" in line for line in tls_failures(caplog)))
    caplog.clear()
    expired = client_certificate(mtls, "old", {"CN": "old", "OU": "apps"}, expired=True)
    assert refused({**ssl_config(mtls), **expired})
    wait_for(lambda: any("expired" in line for line in tls_failures(caplog)))
    assert_still_serving(mtls)


def test_subject_no_rule_maps_is_refused(mtls: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    config = {**ssl_config(mtls), **client_certificate(mtls, "nomatch", {"CN": "dave", "OU": "sales"})}
    assert refused(config)
    assert any("no ssl_principal_mapping_rules apply to 'CN=dave,OU=sales'" in r.getMessage()
               for r in caplog.records)


def test_garbage_instead_of_a_handshake(mtls: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with socket.create_connection(("127.0.0.1", mtls.server.listener_port("SSL")), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        read_until_closed(sock)
    with socket.create_connection(("127.0.0.1", mtls.server.listener_port("SSL")), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)  # a Kafka frame on a TLS port
        read_until_closed(sock)
    wait_for(lambda: len(tls_failures(caplog)) >= 2)
    assert len(tls_failures(caplog)) == 2  # one line per connection
    assert_still_serving(mtls)


def read_until_closed(sock: socket.socket) -> None:
    """Whatever the broker answers (a TLS alert at most), then EOF."""
    for _ in range(10):
        if sock.recv(4096) == b"":
            return
    raise AssertionError("the broker kept the connection open")


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_client_stopping_mid_handshake_times_out(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with Broker(tls=True, authentication_timeout_ms=300) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
            context = ssl.create_default_context(cafile=broker.certificates.location)
            hello = ssl.MemoryBIO()
            tls = context.wrap_bio(ssl.MemoryBIO(), hello, server_hostname="localhost")
            with pytest.raises(ssl.SSLWantReadError):
                tls.do_handshake()
            sock.sendall(hello.read()[:20])  # part of a ClientHello, then silence
            read_until_closed(sock)  # closed by the broker
        wait_for(lambda: any("handshake is taking longer" in line for line in tls_failures(caplog)))


def test_sasl_rules_apply_inside_tls(mtls: Broker) -> None:
    """SASL_SSL: only ApiVersions and SASL before authentication, as on SASL_PLAINTEXT."""
    context = ssl.create_default_context(cafile=mtls.certificates.location)
    issued = mtls.certificates.issue("wire", {"CN": "wire", "OU": "apps"})
    context.load_cert_chain(issued.certificate, issued.key)
    wire = Wire.__new__(Wire)
    wire.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", mtls.server.listener_port("SASL_SSL")),
                                                             timeout=10), server_hostname="localhost")
    wire.correlation = 0
    with wire:
        answer = wire.request(17, 1, request_class(17, 1)(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.none
        wire.send(3, 1, request_class(3, 1)(topics=()))
        assert wire.is_closed()
