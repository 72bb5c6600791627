"""OAUTHBEARER against Apache Kafka 4.1 with the same JWKS: each token and each malformed message answered alike.

Kafka 4.1 runs its OAuthBearerValidatorCallbackHandler (the JWKS as a
file, the allowed-URL system property set as Kafka 4 requires); both
brokers get the same issuer and audience, and every case is the raw
exchange a client makes: SaslHandshake, SaslAuthenticate with the RFC 7628
client first message, and after a challenge the client's 0x01.

Kafka 4.1.0 must be told sasl.oauthbearer.jwt.validator.class=BrokerJwtValidator:
with its default (DefaultJwtValidator) this release checks no signature,
expiry, issuer or audience at all (it falls back to the client-side
validator), and accepted every forged token of these cases when tried.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from compat_tests.reference import ReferenceKafka, unavailable
from kafkacompat.testing import Broker
from tests.security.oidc import AUDIENCE, ISSUER, Issuer, client_first
from tests.wire import Wire, request_class


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    idp = Issuer()
    yield idp
    idp.close()


@pytest.fixture(scope="module")
def jwks(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(issuer.jwks()))
    return f"file://{path}"


@pytest.fixture(scope="module")
def kafka41(jwks: str) -> Iterator[ReferenceKafka]:
    why = unavailable()
    if why:
        pytest.skip(why)
    listener = "listener.name.sasl_plaintext.oauthbearer."
    settings = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        listener + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        listener + "sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwt.validator.class": "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
        "sasl.oauthbearer.jwks.endpoint.url": jwks,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    with pytest.MonkeyPatch.context() as patch:  # Kafka 4 fetches no URL it is not allowed to
        patch.setenv("KAFKA_OPTS", f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks}")
        with ReferenceKafka(sasl_users={"admin": "admin-pw"}, **settings) as running:
            yield running


@pytest.fixture(scope="module")
def ours(jwks: str) -> Iterator[Broker]:
    with Broker(sasl={}, sasl_enabled_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"],
                sasl_oauthbearer_jwks_endpoint_url=jwks, sasl_oauthbearer_expected_issuer=ISSUER,
                sasl_oauthbearer_expected_audience=[AUDIENCE]) as running:
        yield running


def exchange(address: str, *messages: bytes) -> list[tuple[int, str | None, bytes, int]]:
    """(error code, error message, auth bytes, session lifetime in s) of each SaslAuthenticate, until it is over."""
    answers = []
    with Wire(address) as wire:
        assert wire.request(17, 1, request_class(17, 1)(mechanism="OAUTHBEARER")).error_code == 0
        for message in messages:
            answer = wire.request(36, 2, request_class(36, 2)(auth_bytes=message))
            answers.append((int(answer.error_code), answer.error_message, bytes(answer.auth_bytes),
                            answer.session_lifetime.total_seconds()))
            if answer.error_code or not answer.auth_bytes:  # refused, or logged in: the exchange is over
                break
    return answers


def both(ours: Broker, kafka41: ReferenceKafka, *messages: bytes) -> tuple[list, list]:
    """Both brokers' answers; session lifetimes (measured seconds apart) count as equal within 10 s."""
    mine = exchange(ours.bootstrap_servers, *messages)
    kafkas = exchange(f"127.0.0.1:{kafka41.sasl_port}", *messages)
    for index, (answer, theirs) in enumerate(zip(mine, kafkas)):
        if abs(answer[3] - theirs[3]) <= 10:
            mine[index] = (*answer[:3], theirs[3])
    return mine, kafkas


def tokens(issuer: Issuer) -> dict[str, str]:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "good": issuer.token("alice", lifetime_s=300),
        "expired": issuer.token("alice", lifetime_s=-120),
        "wrong-audience": issuer.token("alice", audience="someone-else"),
        "no-audience": issuer.token("alice", audience=None),
        "wrong-issuer": issuer.token("alice", issuer="https://evil.example.test"),
        "wrongly-signed": issuer.token("alice", key=stranger),
        "unknown-kid": issuer.token("alice", kid="not-published"),
        "no-subject": issuer.token(""),
        "not-yet-valid": issuer.token("alice", nbf=int(time.time()) + 600),
        "scope-list": issuer.token("alice", scope=["kafka", "read"]),
        "scope-number": issuer.token("alice", scope=42),
        "scope-empty": issuer.token("alice", scope=""),
        "iat-ahead": issuer.token("alice", iat=int(time.time()) + 600),
    }


CASES = ["good", "expired", "wrong-audience", "no-audience", "wrong-issuer", "wrongly-signed", "unknown-kid",
         "no-subject", "not-yet-valid", "scope-list", "scope-number", "scope-empty", "iat-ahead"]


@pytest.mark.parametrize("case", CASES)
def test_tokens_are_judged_alike(ours: Broker, kafka41: ReferenceKafka, issuer: Issuer, case: str) -> None:
    mine, kafkas = both(ours, kafka41, client_first(tokens(issuer)[case]), b"\x01")
    assert mine == kafkas


# (not compared: `auth=Basic ...`, which Kafka 4.1 answers by closing the connection without a word, where
# this broker answers SASL_AUTHENTICATION_FAILED and then closes, as for every other malformed message)
@pytest.mark.parametrize("message", [
    b"", b"n,,\x01auth=Bearer\x01\x01", b"y,,\x01auth=Bearer abc\x01\x01",
    b"n,,\x01auth=Bearer abc\x01", b"n,,\x01auth=Bearer a$c\x01\x01", b"\x01",
])
def test_malformed_messages_are_refused_alike(ours: Broker, kafka41: ReferenceKafka, message: bytes) -> None:
    mine, kafkas = both(ours, kafka41, message)
    assert mine == kafkas


def test_extensions_and_authorization_ids_alike(ours: Broker, kafka41: ReferenceKafka, issuer: Issuer) -> None:
    token = issuer.token("alice")
    for message in (client_first(token, "alice", traceId="abc"), client_first(token, "bob")):
        mine, kafkas = both(ours, kafka41, message)
        assert mine == kafkas
