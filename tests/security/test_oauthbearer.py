"""SASL/OAUTHBEARER and HTTP Bearer as their users meet them: JWTs from an identity provider log in, as User:<sub>.

The identity provider is made inside the test (tests/security/oidc.py): RSA
keys, a JWKS and a client_credentials token endpoint on loopback. Stock
clients log in with it (librdkafka with an oauth_cb or its own OIDC login,
aiokafka and kafka-python with a token provider, Java kafka-clients with its
built-in OIDC login); tokens that are
expired, for another audience, from another issuer or signed by a key the
JWKS lacks are refused as Kafka refuses them: the challenge
{"status":"invalid_token"}, then SASL_AUTHENTICATION_FAILED.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa
from kio.schema.errors import ErrorCode

from compat_tests.drivers import ClientUnavailable
from compat_tests.drivers.java import (
    CLIENT_JARS_41,
    JVM_FLAGS,
    SOURCES,
    classpath,
    compile_sources,
    compiled,
    flink_lib,
)
from compat_tests.drivers.kafkajs import installed as kafkajs_installed
from compat_tests.drivers.kafkajs import node_server
from kafkacompat.config import ConfigError, load_config
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import find_kafka_home
from tests.wire import Wire, request_class

from .oidc import AUDIENCE, CLIENTS, ISSUER, Issuer, client_first

AUDIT = "kafkacompat.audit"
INVALID_TOKEN = '{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def issuer():
    idp = Issuer()
    yield idp
    idp.close()


@pytest.fixture(scope="module")
def broker(issuer: Issuer):
    with Broker(sasl={"scram-user": "scram-pw"}, sasl_enabled_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"],
                sasl_oauthbearer_jwks_endpoint_url=issuer.jwks_url, sasl_oauthbearer_expected_issuer=ISSUER,
                sasl_oauthbearer_expected_audience=[AUDIENCE], authorizer=True,
                super_users=["User:alice", "User:billing-service"], http_port=0,
                http_authentication="oauthbearer") as running:
        yield running


def sasl_socket(broker: Broker) -> Wire:
    return Wire(broker.bootstrap_servers)


def authenticate(wire: Wire, token: bytes) -> object:
    wire.request(17, 1, request_class(17, 1)(mechanism="OAUTHBEARER"))
    return wire.request(36, 2, request_class(36, 2)(auth_bytes=token))


def test_a_valid_token_logs_in_as_its_subject_until_it_expires(broker: Broker, issuer: Issuer,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, client_first(issuer.token("alice", lifetime_s=120), "alice", traceId="t1"))
        assert answer.error_code == ErrorCode.none and answer.auth_bytes == b""
        assert 100 < answer.session_lifetime.total_seconds() <= 120  # the token's expiry, not "never"
        assert wire.request(3, 1, request_class(3, 1)(topics=())).brokers
    assert any("authenticated: principal=User:alice" in r.getMessage() and "mechanism=OAUTHBEARER scope=kafka"
               in r.getMessage() for r in caplog.records if r.name == AUDIT)


def _bad_tokens(issuer: Issuer) -> dict[str, str]:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "expired": issuer.token("alice", lifetime_s=-120),  # past the 30 s clock skew
        "wrong-audience": issuer.token("alice", audience="someone-else"),
        "wrongly-signed": issuer.token("alice", key=stranger),  # the kid is right, the key is not
        "wrong-issuer": issuer.token("alice", issuer="https://evil.example.test"),
        "no-subject": issuer.token(""),
        "not-yet-valid": issuer.token("alice", nbf=int(time.time()) + 600),
        "empty-scope": issuer.token("alice", scope=""),  # Kafka: "scope value must be non-empty"
    }


BAD = ["expired", "wrong-audience", "wrongly-signed", "wrong-issuer", "no-subject", "not-yet-valid", "empty-scope"]


@pytest.mark.parametrize("case", BAD)
def test_a_bad_token_gets_kafkas_challenge_then_authentication_failed(broker: Broker, issuer: Issuer, case: str,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    with sasl_socket(broker) as wire:
        challenge = authenticate(wire, client_first(_bad_tokens(issuer)[case]))
        assert challenge.error_code == ErrorCode.none and challenge.auth_bytes == INVALID_TOKEN.encode()
        answer = wire.request(36, 2, request_class(36, 2)(auth_bytes=b"\x01"))  # the client's acknowledgement
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == INVALID_TOKEN
        assert wire.is_closed()
    failed = [r.getMessage() for r in caplog.records if r.name == AUDIT and "authentication failed" in r.getMessage()]
    assert len(failed) == 1 and "mechanism=OAUTHBEARER" in failed[0]
    assert case == "no-subject" or "principal=User:alice" in failed[0]


@pytest.mark.parametrize("message", [b"", b"n,,\x01auth=Bearer\x01\x01", b"y,,\x01auth=Bearer abc\x01\x01",
                                     b"n,,\x01auth=Basic abc\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01",
                                     b"n,,\x01auth=Bearer abc\x01"])
def test_a_malformed_client_first_message_is_refused(broker: Broker, message: bytes) -> None:
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, message)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == ("Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism OAUTHBEARER")
        assert wire.is_closed()


def test_the_session_ends_with_the_token_or_connections_max_reauth_ms_whichever_is_first(issuer: Issuer) -> None:
    with Broker(sasl={}, sasl_enabled_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_jwks_endpoint_url=issuer.jwks_url,
                connections_max_reauth_ms=60_000) as broker:
        with sasl_socket(broker) as wire:  # the token outlives the reauth limit
            assert authenticate(wire, client_first(issuer.token(lifetime_s=600))).session_lifetime.total_seconds() \
                == 60
        with sasl_socket(broker) as wire:  # the token ends first: 3 s, then the next request closes the connection
            lifetime = authenticate(wire, client_first(issuer.token(lifetime_s=3))).session_lifetime.total_seconds()
            assert 0 < lifetime <= 3
            assert wire.request(3, 1, request_class(3, 1)(topics=())).brokers
            wire.sock.settimeout(lifetime + 0.5)
            with pytest.raises(OSError):  # wait out the token on the socket, not with sleep
                wire.sock.recv(1)
            wire.sock.settimeout(5)
            wire.send(3, 1, request_class(3, 1)(topics=()))
            assert wire.is_closed()


def test_an_exp_far_ahead_logs_in_with_a_bounded_session(broker: Broker, issuer: Issuer) -> None:
    """An exp absurdly far ahead (a provider writing milliseconds, or worse) must not overflow the session lifetime."""
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, client_first(issuer.token("alice", lifetime_s=10**15)))
        assert answer.error_code == ErrorCode.none
        assert 0 < answer.session_lifetime.total_seconds() < 8000 * 365 * 86400


@pytest.mark.parametrize("claim,value", [("iat", 10**400), ("exp", 10**400), ("exp", "9999999999"),
                                         ("iat", "now"), ("nbf", 1e308), ("aud", {"x": 1}), ("sub", ["alice"])])
def test_hostile_claim_values_are_answered_not_crashed_on(broker: Broker, issuer: Issuer, claim: str,
                                                          value: object) -> None:
    """Claims PyJWT lets through or chokes on (huge integers, digit strings, wrong types): every one gets an
    answer (a login, or Kafka's challenge), never a dropped connection; an exp that is no number is refused."""
    now = int(time.time())
    payload = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60, claim: value}
    token = jwt.api_jws.encode(json.dumps(payload).encode(), issuer.key, algorithm="RS256",
                               headers={"kid": issuer.kid})
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, client_first(token))
        assert answer.error_code == ErrorCode.none and answer.auth_bytes in (b"", INVALID_TOKEN.encode())
        if claim == "exp" and isinstance(value, str):
            assert answer.auth_bytes == INVALID_TOKEN.encode()


def test_an_authorization_id_other_than_the_subject_is_refused(broker: Broker, issuer: Issuer) -> None:
    with sasl_socket(broker) as wire:
        answer = authenticate(wire, client_first(issuer.token("alice"), "bob"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "different from the token's principal name (alice)" in answer.error_message


def accepted_within(broker: Broker, token: str, timeout: float) -> bool:
    """Whether a login with `token` succeeds within `timeout` s (polled: the JWKS is refetched at most once a
    second)."""
    deadline = time.monotonic() + timeout
    while True:
        with sasl_socket(broker) as wire:
            if authenticate(wire, client_first(token)).auth_bytes == b"":
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_a_rotated_key_is_fetched_when_a_token_names_it(broker: Broker, issuer: Issuer) -> None:
    """Without waiting for the hourly refresh (sasl_oauthbearer_jwks_endpoint_refresh_ms)."""
    fetches = issuer.jwks_fetches
    issuer.rotate("key-2")
    try:
        assert accepted_within(broker, issuer.token("alice"), timeout=5)
        assert 1 <= issuer.jwks_fetches - fetches <= 2
    finally:
        issuer.rotate("key-1")


def test_unknown_key_ids_refetch_the_jwks_at_most_once_a_second(broker: Broker, issuer: Issuer) -> None:
    """A stranger sending tokens with made-up key ids cannot make the broker hammer the identity provider."""
    fetches = issuer.jwks_fetches
    started = time.monotonic()
    for _ in range(20):
        with sasl_socket(broker) as wire:
            token = issuer.token("alice", kid=uuid.uuid4().hex)
            assert authenticate(wire, client_first(token)).auth_bytes == INVALID_TOKEN.encode()
    assert issuer.jwks_fetches - fetches <= 1 + int(time.monotonic() - started)


def test_a_jwks_that_is_down_at_start_refuses_logins_until_it_answers() -> None:
    idp = Issuer()
    idp.published = False
    try:
        with Broker(sasl={}, sasl_enabled_mechanisms=["OAUTHBEARER"],
                    sasl_oauthbearer_jwks_endpoint_url=idp.jwks_url) as broker:
            with sasl_socket(broker) as wire:
                assert authenticate(wire, client_first(idp.token("alice"))).auth_bytes == INVALID_TOKEN.encode()
            idp.published = True
            assert accepted_within(broker, idp.token("alice"), timeout=10)
    finally:
        idp.close()


# --- librdkafka (confluent-kafka) --------------------------------------------------------------

def librdkafka(broker: Broker, token: str | None = None, **extra: object) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "OAUTHBEARER", **extra}
    if token is not None:
        config["oauth_cb"] = lambda _config: (token, time.time() + 300)
    return config


def test_librdkafka_produces_and_consumes_with_an_oauth_cb(broker: Broker, issuer: Issuer) -> None:
    topic = f"oauth-rdkafka-{uuid.uuid4().hex[:6]}"
    producer = Producer(librdkafka(broker, issuer.token("alice")))
    delivered: list[object] = []
    producer.produce(topic, b"hello", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(15) == 0 and delivered == [None]
    consumer = Consumer({**librdkafka(broker, issuer.token("alice")), "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        message = None
        while time.monotonic() < deadline and (message is None or message.error()):
            message = consumer.poll(0.5)
    finally:
        consumer.close()
    assert message is not None and message.value() == b"hello"


def test_librdkafka_builtin_oidc_client_credentials(broker: Broker, issuer: Issuer,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's own OIDC login (sasl.oauthbearer.method=oidc) asks the token endpoint; no oauth_cb."""
    caplog.set_level(logging.INFO, logger=AUDIT)
    producer = Producer(librdkafka(broker, **{
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "billing-service",
        "sasl.oauthbearer.client.secret": CLIENTS["billing-service"],
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url}))
    delivered: list[object] = []
    producer.produce(f"oauth-oidc-{uuid.uuid4().hex[:6]}", b"x", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(15) == 0 and delivered == [None]
    assert any("authenticated: principal=User:billing-service" in r.getMessage()
               for r in caplog.records if r.name == AUDIT)


@pytest.mark.parametrize("case", ["expired", "wrong-audience", "wrongly-signed"])
def test_librdkafka_is_told_authentication_failed(broker: Broker, issuer: Issuer, case: str) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**librdkafka(broker, _bad_tokens(issuer)[case]), "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert INVALID_TOKEN in errors[0].str()


def test_the_subject_is_the_principal_the_authorizer_checks(broker: Broker, issuer: Issuer) -> None:
    """bob's token is valid but bob is no super user and has no ACL: his produce is refused by the authorizer."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**librdkafka(broker, issuer.token("bob")), "message.timeout.ms": 5000})
    producer.produce(f"oauth-denied-{uuid.uuid4().hex[:6]}", b"x", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(10)
    assert outcome and outcome[0] is not None and outcome[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.slow
def test_librdkafka_reauthenticates_with_a_fresh_token_before_the_old_expires(
        broker: Broker, issuer: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    """Tokens living 3 s: the session ends with each, so a producer working for 5 s re-authenticates with the
    next token its oauth_cb hands out (KIP-368), on the same connection."""
    caplog.set_level(logging.INFO, logger=AUDIT)
    handed_out: list[str] = []

    def fresh(_config: str) -> tuple[str, float]:
        handed_out.append(issuer.token("alice", lifetime_s=3))
        return handed_out[-1], time.time() + 3

    producer = Producer({**librdkafka(broker), "oauth_cb": fresh})
    delivered: list[object] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        producer.produce("oauth-reauth", b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        producer.poll(0.5)
    assert delivered and all(err is None for err in delivered)
    assert len(handed_out) >= 2
    assert any("re-authenticated: principal=User:alice" in r.getMessage() and "OAUTHBEARER" in r.getMessage()
               for r in caplog.records if r.name == AUDIT)


# --- aiokafka ----------------------------------------------------------------------------------

def test_aiokafka_produces_and_consumes_with_a_token_provider(broker: Broker, issuer: Issuer) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return issuer.token("alice")

    options = {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
               "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    topic = f"oauth-aiokafka-{uuid.uuid4().hex[:6]}"

    async def go() -> bytes:
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"hello-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **options, auto_offset_reset="earliest")
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 15)).value
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == b"hello-aiokafka"


def test_kafka_python_produces_and_consumes_with_a_token_provider(broker: Broker, issuer: Issuer) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    try:  # kafka-python 3.x moved it
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return issuer.token("alice")

    options = {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
               "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    topic = f"oauth-kafka-python-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(**options, max_block_ms=15000)
    try:
        producer.send(topic, b"hello-kafka-python").get(timeout=15)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, **options, auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        values = [message.value for _, message in zip(range(1), consumer)]
    finally:
        consumer.close()
    assert values == [b"hello-kafka-python"]


@pytest.mark.slow
@pytest.mark.parametrize("case,outcome", [("good", "OK hello-kafkajs"), ("expired", "ERROR KafkaJSNumberOfRetries")])
def test_kafkajs_with_an_oauth_bearer_provider(broker: Broker, issuer: Issuer, case: str, outcome: str) -> None:
    """kafkajs does not acknowledge the error challenge with 0x01: it goes on with its next request, which
    closes the connection (a request before authentication completed); it retries, then gives up."""
    try:
        kafkajs_installed()
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    token = issuer.token("alice") if case == "good" else _bad_tokens(issuer)[case]
    settings = {"protocol": "SASL_PLAINTEXT", "mechanism": "OAUTHBEARER", "token": token}
    done = node_server().run("secure", [broker.bootstrap_servers, json.dumps(settings),
                                        f"oauth-kafkajs-{uuid.uuid4().hex[:6]}"], timeout=90)
    assert (done.stdout.strip() or done.stderr.strip()).splitlines()[-1].startswith(outcome), done


# --- Java kafka-clients: the built-in OIDC client_credentials login --------------------------------

def java_properties(issuer: Issuer, client: str, tmp_path) -> str:
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=OAUTHBEARER",
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler",
        f"sasl.oauthbearer.token.endpoint.url={issuer.token_url}",
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="{client}" clientSecret="{CLIENTS[client]}";',
    ]) + "\n")
    return str(props)


@functools.cache
def _compiled_41(source: str, class_path: str) -> str:
    return compile_sources([source], class_path)


def java_oidc_command(version: str, issuer: Issuer) -> list[str]:
    """`java ... SecureClient` on kafka-clients `version` (3.9.1 from pyflink/lib, 4.1.0 from Kafka 4.1's libs/)
    with what its OIDC login needs beside it: Jackson and jose4j; skips without them. 4.x fetches only URLs
    listed in the system property org.apache.kafka.sasl.oauthbearer.allowed.urls, as a user must set it."""
    home = find_kafka_home()
    if home is None:
        pytest.skip("Kafka 4.1's libs/ not found: jose4j, which Java's OIDC login needs, comes from there")
    libs = home / "libs"
    jose4j = str(sorted(libs.glob("jose4j-*.jar"))[-1])
    try:
        if version == "3.9.1":
            jackson = [str(flink_lib() / f"jackson-{part}.jar") for part in ("databind", "core", "annotations")]
            return ["java", *JVM_FLAGS, "-cp", classpath(*jackson, jose4j, compiled()), "SecureClient"]
        jars = [str(libs / jar) for jar in CLIENT_JARS_41] + [
            str(sorted(libs.glob(f"jackson-{part}-2*.jar"))[-1]) for part in ("databind", "core", "annotations")]
        classes = _compiled_41(str(SOURCES / "SecureClient.java"), ":".join(jars))
        return ["java", *JVM_FLAGS, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.token_url}",
                "-cp", ":".join([*jars, jose4j, classes]), "SecureClient"]
    except ClientUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.9.1", "4.1.0"])
@pytest.mark.parametrize("client,outcome", [
    ("billing-service", "OK hello-java"),
    ("stranger-service", 'ERROR SaslAuthenticationException: {"status":"invalid_token"}'),
])
def test_java_logs_in_with_client_credentials_from_the_token_endpoint(broker: Broker, issuer: Issuer, client: str,
                                                                        outcome: str, version: str, tmp_path) -> None:
    """Java's built-in OIDC login (KIP-768): the client asks the token endpoint, the broker checks the JWT.
    The stranger's token is signed by a key the JWKS lacks: the broker refuses it, with Kafka's error."""
    topic = f"oauth-java-{uuid.uuid4().hex[:6]}"
    done = subprocess.run([*java_oidc_command(version, issuer), broker.bootstrap_servers,
                           java_properties(issuer, client, tmp_path), topic],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip().splitlines()[-1:][0].startswith(outcome), done.stdout + done.stderr[-3000:]


# --- HTTP Bearer ---------------------------------------------------------------------------------

def http_get(broker: Broker, path: str, token: str | None) -> tuple[int, dict[str, str], object]:
    request = urllib.request.Request(broker.http_url + path)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_http_bearer_token_is_the_same_principal(broker: Broker, issuer: Issuer,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    topic = f"oauth-http-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    status, _, body = http_get(broker, "/topics", issuer.token("alice"))
    assert status == 200 and topic in body
    for token in (_bad_tokens(issuer)["wrongly-signed"], _bad_tokens(issuer)["expired"], None):
        status, headers, body = http_get(broker, "/topics", token)
        assert status == 401 and body == {"error_code": 40101, "message": "Unauthorized"}
        assert headers["WWW-Authenticate"].startswith("Bearer ")
    assert any("mechanism=OAUTHBEARER" in r.getMessage() and "Signature verification failed" in r.getMessage()
               and "claims 'alice'" in r.getMessage() for r in caplog.records if r.name == AUDIT)


def test_oauthbearer_without_a_jwks_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="needs sasl_oauthbearer_jwks_endpoint_url"):
        load_config(environ={}, overrides={"sasl_enabled_mechanisms": ["OAUTHBEARER"]})
    with pytest.raises(ConfigError, match="is not a readable file"):
        load_config(environ={}, overrides={"sasl_enabled_mechanisms": ["OAUTHBEARER"],
                                           "sasl_oauthbearer_jwks_endpoint_url": f"file://{tmp_path}/none.json"})


def test_a_jwks_file_serves_as_well(issuer: Issuer, tmp_path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    with Broker(sasl={}, sasl_enabled_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_jwks_endpoint_url=f"file://{jwks}",
                sasl_oauthbearer_sub_claim_name="client_id") as broker:
        with sasl_socket(broker) as wire:
            answer = authenticate(wire, client_first(issuer.token("ignored", client_id="reporting")))
            assert answer.error_code == ErrorCode.none
