"""SASL listeners as clients see them: logins that work, logins refused with Kafka's error, and what is closed."""

from __future__ import annotations

import concurrent.futures
import logging
import struct
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kio.schema.errors import ErrorCode

from kafkacompat.security.scram import ScramClient
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
AUDIT = "kafkacompat.audit"


@pytest.fixture(scope="module")
def broker():
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"],
                connections_max_reauth_ms=60_000) as running:
        yield running


def produce_and_consume(config: dict[str, str], topic: str) -> list[bytes]:
    producer = Producer(config)
    errors: list[object] = []
    producer.produce(topic, b"hello", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None]
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        for _ in range(30):
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                return [msg.value()]
        return []
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_right_credentials_produce_and_consume(broker: Broker, mechanism: str) -> None:
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    assert produce_and_consume(broker.client_config("alice", mechanism=mechanism), topic) == [b"hello"]


@pytest.mark.parametrize("mechanism,message", [
    ("SCRAM-SHA-512", "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                      "SCRAM-SHA-512"),
    ("PLAIN", "Authentication failed: Invalid username or password"),
])
def test_wrong_password_is_refused_with_kafkas_message(broker: Broker, mechanism: str, message: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    errors: list[KafkaError] = []
    producer = Producer({**broker.client_config("alice", "not-it", mechanism=mechanism),
                         "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("refused", b"x")
    producer.flush(5)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert message in errors[0].str()
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT and "failed" in r.getMessage()]
    assert any("principal=User:alice" in line and f"mechanism={mechanism}" in line for line in lines)
    assert not any("not-it" in line for line in lines), "the audit line must not carry the password"


def test_unknown_user_fails_like_a_wrong_password(broker: Broker) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**broker.client_config("mallory", "x"), "error_cb": errors.append})
    producer.poll(3)
    assert errors and "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0].str()


def sasl_socket(broker: Broker) -> Wire:
    return Wire(f"127.0.0.1:{broker.server.listener_port('SASL_PLAINTEXT')}")


def handshake(wire: Wire, mechanism: str, version: int = 1) -> object:
    return wire.request(17, version, request_class(17, version)(mechanism=mechanism))


def authenticate(wire: Wire, token: bytes, version: int = 2) -> object:
    return wire.request(36, version, request_class(36, version)(auth_bytes=token))


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def metadata(wire: Wire) -> object:
    return wire.request(3, 1, request_class(3, 1)(topics=()))


def test_requests_before_authentication_close_the_connection(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        wire.request(18, 0, request_class(18, 0)())  # ApiVersions is allowed
        wire.send(3, 1, request_class(3, 1)(topics=()))
        assert wire.is_closed()
    with sasl_socket(broker) as wire:  # after the handshake, before the token
        handshake(wire, "PLAIN")
        wire.send(3, 1, request_class(3, 1)(topics=()))
        assert wire.is_closed()


def test_plaintext_listener_has_no_sasl(broker: Broker) -> None:
    with Wire(f"127.0.0.1:{broker.server.listener_port('PLAINTEXT')}") as wire:
        assert handshake(wire, "PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert metadata(wire).brokers[0].port == broker.server.listener_port("PLAINTEXT")


def test_unsupported_mechanism_answers_the_enabled_ones_then_closes(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        answer = handshake(wire, "GSSAPI")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert wire.is_closed()


def test_plain_over_saslauthenticate_reports_the_session_lifetime(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        assert handshake(wire, "PLAIN").error_code == ErrorCode.none
        answer = authenticate(wire, plain("bob", USERS["bob"]))
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() * 1000 == 60_000  # connections_max_reauth_ms
        assert metadata(wire).brokers[0].port == broker.server.listener_port("SASL_PLAINTEXT")


def test_handshake_v0_exchanges_bare_tokens(broker: Broker) -> None:
    """Old clients: after SaslHandshake v0 the token travels without a Kafka header, and so does the answer."""
    with sasl_socket(broker) as wire:
        assert handshake(wire, "PLAIN", version=0).error_code == ErrorCode.none
        token = plain("alice", USERS["alice"])
        wire.send_raw(struct.pack(">i", len(token)) + token)
        assert wire.read_frame() == b""  # PLAIN's empty answer, length-prefixed
        assert metadata(wire).brokers  # authenticated
    with sasl_socket(broker) as wire:  # a wrong password on v0: no way to say why, the connection closes
        handshake(wire, "PLAIN", version=0)
        token = plain("alice", "wrong")
        wire.send_raw(struct.pack(">i", len(token)) + token)
        assert wire.is_closed()


def test_scram_exchange_proves_the_server_and_reauthenticates(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        for _ in range(2):  # the second round is KIP-368 re-authentication on the same connection
            handshake(wire, "SCRAM-SHA-512")
            client = ScramClient("SCRAM-SHA-512", "alice", USERS["alice"])
            first = authenticate(wire, client.first())
            assert first.error_code == ErrorCode.none
            assert b",i=4096" in first.auth_bytes and first.auth_bytes.startswith(b"r=" + client.nonce.encode())
            answer = authenticate(wire, client.final(first.auth_bytes))
            assert answer.error_code == ErrorCode.none
            assert client.verify(answer.auth_bytes)
            assert metadata(wire).brokers


def test_reauthentication_cannot_change_the_principal(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        handshake(wire, "PLAIN")
        assert authenticate(wire, plain("alice", USERS["alice"])).error_code == ErrorCode.none
        handshake(wire, "PLAIN")
        answer = authenticate(wire, plain("bob", USERS["bob"]))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals during re-authentication" in answer.error_message
        assert wire.is_closed()


@pytest.mark.parametrize("token", [
    b"", b"\xff\xfe\x00garbage", b"n,,", b"x,,n=alice,r=abc", b"n,,n=al=ice,r=abc", b"n,,r=abc,n=alice",
])
def test_malformed_scram_first_message_is_refused_and_closed(broker: Broker, token: bytes) -> None:
    with sasl_socket(broker) as wire:
        handshake(wire, "SCRAM-SHA-512")
        answer = authenticate(wire, token)
        assert answer.error_code == ErrorCode.sasl_authentication_failed and answer.error_message
        assert wire.is_closed()
    with sasl_socket(broker) as wire:  # the broker still serves
        handshake(wire, "PLAIN")
        assert authenticate(wire, plain("alice", USERS["alice"])).error_code == ErrorCode.none


@pytest.mark.parametrize("final", ["wrong-nonce", "bad-binding", "no-proof", "bad-base64"])
def test_bad_scram_final_message_is_refused(broker: Broker, final: str) -> None:
    with sasl_socket(broker) as wire:
        handshake(wire, "SCRAM-SHA-512")
        client = ScramClient("SCRAM-SHA-512", "alice", USERS["alice"])
        first = authenticate(wire, client.first())
        token = client.final(first.auth_bytes, nonce="someone-elses" if final == "wrong-nonce" else None)
        token = {"bad-binding": token.replace(b"c=biws", b"c=eSws"), "no-proof": token.split(b",p=")[0],
                 "bad-base64": token.split(b",p=")[0] + b",p=***"}.get(final, token)
        answer = authenticate(wire, token)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert wire.is_closed()


def test_plain_token_malformed(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        handshake(wire, "PLAIN")
        answer = authenticate(wire, b"no-nul-bytes")
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "Invalid SASL/PLAIN response" in answer.error_message
        assert wire.is_closed()


def test_oversized_frame_before_authentication_closes(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        wire.send_raw(struct.pack(">i", 10 * 1024 * 1024))  # past sasl_server_max_receive_size
        assert wire.is_closed()


def test_authenticate_without_handshake_is_an_illegal_state(broker: Broker) -> None:
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, plain("alice", USERS["alice"]))
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert wire.is_closed()


def test_a_thousand_failed_logins_leave_others_served(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """Brute force: 1,000 wrong passwords (PLAIN and SCRAM, 16 at once) while a real user keeps working."""
    caplog.set_level(logging.WARNING, logger=AUDIT)

    def attempt(i: int) -> int:
        with sasl_socket(broker) as wire:
            if i % 2:
                handshake(wire, "PLAIN")
                return authenticate(wire, plain("alice", f"guess-{i}")).error_code
            handshake(wire, "SCRAM-SHA-512")
            client = ScramClient("SCRAM-SHA-512", "alice", f"guess-{i}")
            first = authenticate(wire, client.first())
            return authenticate(wire, client.final(first.auth_bytes)).error_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        attempts = pool.map(attempt, range(1000))
        served = [metadata_as_alice(broker) for _ in range(20)]  # meanwhile, a user with the right password
        codes = list(attempts)
    assert codes == [ErrorCode.sasl_authentication_failed] * 1000
    assert all(served)
    failed = [r for r in caplog.records if r.name == AUDIT and "authentication failed" in r.getMessage()]
    assert len(failed) >= 1000
    assert metadata_as_alice(broker)


def metadata_as_alice(broker: Broker) -> bool:
    with sasl_socket(broker) as wire:
        handshake(wire, "PLAIN")
        assert authenticate(wire, plain("alice", USERS["alice"])).error_code == ErrorCode.none
        return bool(metadata(wire).brokers)


def test_unauthenticated_client_is_closed_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with Broker(sasl=USERS, authentication_timeout_ms=300) as broker:
        with sasl_socket(broker) as wire:
            handshake(wire, "SCRAM-SHA-512")  # and then nothing
            assert wire.is_closed(timeout=5)
        assert any("not authenticated within 300 ms" in r.getMessage() for r in caplog.records)


def test_expired_session_closes_at_the_next_request() -> None:
    with Broker(sasl=USERS, connections_max_reauth_ms=200) as broker:
        with sasl_socket(broker) as wire:
            handshake(wire, "PLAIN")
            assert authenticate(wire, plain("alice", USERS["alice"])).session_lifetime.total_seconds() == 0.2
            assert metadata(wire).brokers
            wire.sock.settimeout(0.5)
            with pytest.raises(OSError):  # wait out the session on the socket, not with sleep
                wire.sock.recv(1)
            wire.sock.settimeout(5)
            wire.send(3, 1, request_class(3, 1)(topics=()))
            assert wire.is_closed()


def test_librdkafka_reauthenticates_before_the_session_ends(caplog: pytest.LogCaptureFixture) -> None:
    """connections.max.reauth.ms=1500: a producer working for 3 s keeps its connection by re-authenticating."""
    caplog.set_level(logging.INFO, logger=AUDIT)
    with Broker(sasl=USERS, connections_max_reauth_ms=1500) as broker:
        producer = Producer(broker.client_config("alice"))
        delivered: list[object] = []
        for i in range(6):
            producer.produce("reauth", str(i).encode(), on_delivery=lambda err, msg: delivered.append(err))
            producer.flush(10)
            consumer_wait = Consumer({**broker.client_config("alice"), "group.id": "unused"})
            consumer_wait.poll(0.5)  # half a second between produces, spent in a client call
            consumer_wait.close()
        assert delivered == [None] * 6
        assert any("re-authenticated: principal=User:alice" in r.getMessage() for r in caplog.records)
