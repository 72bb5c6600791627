"""Delegation tokens on the wire: who may manage them, Kafka's error for each refusal, SCRAM logins with a token.

One broker with a SASL_PLAINTEXT and a PLAINTEXT listener, the authorizer on
(no ACL, no access) and a secret key. The same steps against Kafka 4.1 with
its own tools are in compat_tests/test_delegation_tokens.py.
"""

from __future__ import annotations

import base64
import datetime
import logging
import socket
import ssl
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafkacompat.protocol.versions import is_flexible
from kio.schema.errors import ErrorCode

from kafkacompat.handlers import SUPPORTED
from kafkacompat.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from kafkacompat.security.scram import ScramClient
from kafkacompat.testing import Broker
from tests.security.test_sasl import authenticate, handshake
from tests.wire import Wire, request_class

USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
SECRET = "wire-test-secret"
HOUR_MS = 3600 * 1000
CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"],
                authorizer=True, delegation_token_secret_key=SECRET) as running:
        yield running


@pytest.fixture(autouse=True)
def real_clock(broker: Broker) -> Iterator[None]:
    yield
    broker.server.cluster.tokens.clock = time.time


def age(broker: Broker, by_ms: int) -> None:
    """Move the broker's token clock ahead of the real one (tokens expire without waiting)."""
    broker.server.cluster.tokens.clock = lambda: time.time() + by_ms / 1000


def login(broker: Broker, name: str, password: str, *, token: bool = False,
          mechanism: str = "SCRAM-SHA-512") -> tuple[Wire, Any]:
    """A connection after a SCRAM exchange as `name` (a user, or a token id with `token`), and the last answer."""
    wire = Wire(f"127.0.0.1:{broker.server.listener_port('SASL_PLAINTEXT')}")
    handshake(wire, mechanism)
    client = ScramClient(mechanism, name, password, token=token)
    first = authenticate(wire, client.first())
    if first.error_code != ErrorCode.none:
        return wire, first
    answer = authenticate(wire, client.final(first.auth_bytes))
    assert answer.error_code != ErrorCode.none or client.verify(answer.auth_bytes)
    return wire, answer


def as_user(broker: Broker, name: str) -> Wire:
    wire, answer = login(broker, name, USERS[name])
    assert answer.error_code == ErrorCode.none
    return wire


def _part(request: type, name: str) -> type:
    """A nested entity of a kio request class (its renewers, its owners)."""
    return getattr(sys.modules[request.__module__], name)


def create_body(version: int = 3, renewers: tuple[tuple[str, str], ...] = (), max_lifetime_ms: int = -1,
                owner: tuple[str, str] | None = None) -> Any:
    cls = request_class(CREATE, version)
    values: dict[str, Any] = {
        "renewers": tuple(_part(cls, "CreatableRenewers")(principal_type=kind, principal_name=name)
                          for kind, name in renewers),
        "max_lifetime": datetime.timedelta(milliseconds=max_lifetime_ms)}
    if version >= 3:
        kind, name = owner or (None, None)
        values.update(owner_principal_type=kind, owner_principal_name=name)
    return cls(**values)


def describe_body(version: int = 3, owners: tuple[str, ...] | None = None) -> Any:
    cls = request_class(DESCRIBE, version)
    owner = _part(cls, "DescribeDelegationTokenOwner")
    return cls(owners=None if owners is None else tuple(
        owner(principal_type=kind, principal_name=name) for kind, _, name in (o.partition(":") for o in owners)))


def ms(moment: datetime.datetime) -> int:
    return round(moment.timestamp() * 1000)


def renew_body(mac: bytes, period_ms: int = -1, version: int = 2) -> Any:
    return request_class(RENEW, version)(hmac=mac, renew_period=datetime.timedelta(milliseconds=period_ms))


def expire_body(mac: bytes, period_ms: int = -1, version: int = 2) -> Any:
    return request_class(EXPIRE, version)(hmac=mac, expiry_time_period=datetime.timedelta(milliseconds=period_ms))


def error_of(wire: Wire, api_key: int, version: int, body: Any) -> tuple[ErrorCode, int | None]:
    """The error code of an answer (its first field) and, for Renew/Expire, its expiry timestamp.

    Read from the raw frame: kio's reader refuses the -1 timestamps Kafka sends with these errors."""
    wire.send(api_key, version, body)
    frame = wire.read_frame()
    at = 4 + (1 if is_flexible(api_key, version) else 0)
    code = ErrorCode(struct.unpack_from(">h", frame, at)[0])
    expiry = struct.unpack_from(">q", frame, at + 2)[0] if api_key in (RENEW, EXPIRE) else None
    return code, expiry


def create(wire: Wire, **options: Any) -> Any:
    answer = wire.request(CREATE, 3, create_body(**options))
    assert answer.error_code == ErrorCode.none, answer
    return answer


def described(wire: Wire, owners: tuple[str, ...] | None = None) -> set[str]:
    answer = wire.request(DESCRIBE, 3, describe_body(owners=owners))
    assert answer.error_code == ErrorCode.none
    return {token.token_id for token in answer.tokens}


def grant(broker: Broker, principal: str, operation: Operation, resource_type: ResourceType, name: str) -> None:
    acl = AclBinding(resource_type, name, PatternType.LITERAL, principal, "*", operation, Permission.ALLOW)
    broker.call(broker.server.cluster.authorizer.acls.add([acl]))


def password(answer: Any) -> str:
    return base64.b64encode(answer.hmac).decode()


@pytest.mark.parametrize("api_key", [CREATE, RENEW, EXPIRE, DESCRIBE])
def test_plaintext_and_token_sessions_may_not_manage_tokens(broker: Broker, api_key: int) -> None:
    bodies = {CREATE: create_body, RENEW: lambda version: renew_body(b"x", version=version),
              EXPIRE: lambda version: expire_body(b"x", version=version), DESCRIBE: describe_body}
    low, high = SUPPORTED[api_key]
    with Wire(f"127.0.0.1:{broker.server.listener_port('PLAINTEXT')}") as wire:
        for version in (low, high):
            code, expiry = error_of(wire, api_key, version, bodies[api_key](version=version))
            assert code == ErrorCode.delegation_token_request_not_allowed
            assert expiry in (None, -1)  # Kafka's ErrorTimestamp
    with as_user(broker, "alice") as wire:
        token = create(wire)
    session, answer = login(broker, token.token_id, password(token), token=True)
    with session:
        assert answer.error_code == ErrorCode.none
        assert error_of(session, api_key, high, bodies[api_key](version=high))[0] == \
            ErrorCode.delegation_token_request_not_allowed


def test_token_login_is_its_owner_until_the_token_expires(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkacompat.audit")
    with as_user(broker, "alice") as wire:
        token = create(wire, max_lifetime_ms=2 * HOUR_MS)
    assert (token.principal_name, token.token_requester_principal_name) == ("alice", "alice")
    assert token.max_timestamp - token.issue_timestamp == datetime.timedelta(hours=2)
    assert token.expiry_timestamp == token.max_timestamp  # the day of delegation_token_expiry_time_ms, capped
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        session, answer = login(broker, token.token_id, password(token), token=True, mechanism=mechanism)
        with session:
            assert answer.error_code == ErrorCode.none
            lifetime = answer.session_lifetime.total_seconds()
            assert 2 * 3600 - 60 < lifetime <= 2 * 3600  # KIP-368: the session ends with the token
    audit = [r.getMessage() for r in caplog.records if r.name == "kafkacompat.audit"]
    assert f"delegation token created: token={token.token_id} owner=User:alice requester=User:alice renewers=-" \
        in audit
    assert any(line.startswith("authenticated: principal=User:alice") and f"delegation_token={token.token_id}" in line
               for line in audit)
    assert not any(password(token) in line for line in audit), "the HMAC is the token's password: never logged"
    age(broker, 2 * HOUR_MS + 1000)
    session, answer = login(broker, token.token_id, password(token), token=True)
    with session:
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == INVALID_CREDENTIALS.format("SCRAM-SHA-512")
        assert session.is_closed()
    assert any(r.getMessage().startswith(f"authentication failed: principal=? delegation_token={token.token_id} ")
               for r in caplog.records)


@pytest.mark.parametrize("case", ["user name as token", "wrong hmac", "token id without tokenauth"])
def test_a_token_login_needs_a_token_its_hmac_and_tokenauth(broker: Broker, case: str) -> None:
    with as_user(broker, "alice") as wire:
        token = create(wire)
    name, secret, token_auth = {
        "user name as token": ("alice", USERS["alice"], True),
        "wrong hmac": (token.token_id, base64.b64encode(b"\0" * 64).decode(), True),
        "token id without tokenauth": (token.token_id, password(token), False),
    }[case]
    session, answer = login(broker, name, secret, token=token_auth)
    with session:
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == INVALID_CREDENTIALS.format("SCRAM-SHA-512")


def test_creating_a_token_for_someone_else_needs_create_tokens_on_that_user(broker: Broker) -> None:
    with as_user(broker, "bob") as wire:
        assert error_of(wire, CREATE, 3, create_body(owner=("User", "carol")))[0] == \
            ErrorCode.delegation_token_authorization_failed
        grant(broker, "User:bob", Operation.CREATE_TOKENS, ResourceType.USER, "User:carol")
        token = create(wire, owner=("User", "carol"))
        assert described(wire, ("User:carol",)) == {token.token_id}  # the requester sees it (KIP-373)
    session, answer = login(broker, token.token_id, password(token), token=True)
    with session:
        assert answer.error_code == ErrorCode.none
    with as_user(broker, "carol") as wire:
        assert token.token_id in described(wire)


def test_renewers_must_be_users(broker: Broker) -> None:
    with as_user(broker, "alice") as wire:
        assert error_of(wire, CREATE, 3, create_body(renewers=(("Group", "ops"),)))[0] == \
            ErrorCode.invalid_principal_type


def test_who_may_renew_and_expire(broker: Broker) -> None:
    with as_user(broker, "alice") as alice, as_user(broker, "bob") as bob, as_user(broker, "carol") as carol:
        token = create(alice, renewers=(("User", "bob"),))
        mac = token.hmac
        assert error_of(carol, RENEW, 2, renew_body(mac))[0] == ErrorCode.delegation_token_owner_mismatch
        assert error_of(carol, EXPIRE, 2, expire_body(mac))[0] == ErrorCode.delegation_token_owner_mismatch
        assert error_of(bob, RENEW, 2, renew_body(b"not-a-token"))[0] == ErrorCode.delegation_token_not_found
        assert error_of(bob, EXPIRE, 2, expire_body(b"not-a-token"))[0] == ErrorCode.delegation_token_not_found
        age(broker, 12 * HOUR_MS)
        code, expiry = error_of(bob, RENEW, 2, renew_body(mac, period_ms=HOUR_MS))
        assert code == ErrorCode.none and abs(expiry - (ms(token.issue_timestamp) + 13 * HOUR_MS)) < 5000
        code, expiry = error_of(alice, RENEW, 2, renew_body(mac, period_ms=10 * 24 * HOUR_MS))
        assert code == ErrorCode.none and abs(expiry - (ms(token.issue_timestamp) + 36 * HOUR_MS)) < 5000  # a day
        code, expiry = error_of(alice, EXPIRE, 2, expire_body(mac, period_ms=10 * 24 * HOUR_MS))
        assert code == ErrorCode.none and expiry == ms(token.max_timestamp)  # never past the max time
        age(broker, 8 * 24 * HOUR_MS)
        assert error_of(alice, RENEW, 2, renew_body(mac))[0] == ErrorCode.delegation_token_expired
        assert error_of(alice, RENEW, 2, renew_body(mac))[0] == ErrorCode.delegation_token_not_found  # removed


def test_expire_now_ends_the_token(broker: Broker) -> None:
    with as_user(broker, "alice") as wire:
        token = create(wire)
        code, expiry = error_of(wire, EXPIRE, 2, expire_body(token.hmac, period_ms=-1))
        assert code == ErrorCode.none and abs(expiry - time.time() * 1000) < 5000
        assert token.token_id not in described(wire, ("User:alice",))
    session, answer = login(broker, token.token_id, password(token), token=True)
    with session:
        assert answer.error_code == ErrorCode.sasl_authentication_failed


def test_describe_shows_owners_requesters_renewers_and_those_granted(broker: Broker) -> None:
    with as_user(broker, "alice") as alice, as_user(broker, "bob") as bob, as_user(broker, "carol") as carol:
        mine = create(alice).token_id
        shared = create(alice, renewers=(("User", "bob"),)).token_id
        assert {mine, shared} <= described(alice)
        assert described(alice, ()) == set()  # an empty owner list asks for nothing, as on Kafka
        seen_by_bob = described(bob)
        assert shared in seen_by_bob and mine not in seen_by_bob
        assert described(bob, ("User:carol",)) & {mine, shared} == set()
        assert described(carol) & {mine, shared} == set()
        grant(broker, "User:carol", Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, mine)
        assert described(carol) & {mine, shared} == {mine}
        grant(broker, "User:carol", Operation.DESCRIBE_TOKENS, ResourceType.USER, "User:alice")
        assert described(carol) & {mine, shared} == {mine, shared}
        answer = alice.request(DESCRIBE, 3, describe_body(owners=("User:alice",)))
        token = next(t for t in answer.tokens if t.token_id == shared)
        assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]
        assert token.hmac == broker.server.cluster.tokens.hmac(shared)


def test_tokens_need_a_secret_key() -> None:
    with Broker(sasl=USERS) as plain:
        wire, answer = login(plain, "alice", USERS["alice"])
        with wire:
            assert answer.error_code == ErrorCode.none
            for api_key, body in ((CREATE, create_body()), (RENEW, renew_body(b"x")), (EXPIRE, expire_body(b"x")),
                                  (DESCRIBE, describe_body())):
                assert error_of(wire, api_key, SUPPORTED[api_key][1], body)[0] == \
                    ErrorCode.delegation_token_auth_disabled


def test_tokens_survive_a_restart_with_the_same_secret(tmp_path) -> None:
    settings: dict[str, Any] = {"sasl": USERS, "data_dir": str(tmp_path), "delegation_token_secret_key": SECRET}
    with Broker(**settings) as first:
        wire, _ = login(first, "alice", USERS["alice"])
        with wire:
            token = create(wire, renewers=(("User", "bob"),))
    with Broker(**settings) as again:
        wire, _ = login(again, "alice", USERS["alice"])
        with wire:
            answer = wire.request(DESCRIBE, 3, describe_body(owners=("User:alice",)))
        (kept,) = answer.tokens
        assert (kept.token_id, kept.hmac, kept.renewers[0].principal_name) == (token.token_id, token.hmac, "bob")
        assert kept.expiry_timestamp == ms(token.expiry_timestamp)
        session, answer = login(again, token.token_id, password(token), token=True)
        with session:
            assert answer.error_code == ErrorCode.none
    with Broker(**{**settings, "delegation_token_secret_key": "another-secret"}) as rotated:
        session, answer = login(rotated, token.token_id, password(token), token=True)
        with session:
            assert answer.error_code == ErrorCode.sasl_authentication_failed  # a new key voids every token


def test_over_ssl_only_a_client_certificate_may_manage_tokens() -> None:
    """Kafka refuses token requests from one-way TLS (the client is User:ANONYMOUS), not from mutual TLS."""
    with Broker(tls=True, listeners=["SSL://127.0.0.1:0"], ssl_client_auth="requested",
                delegation_token_secret_key=SECRET) as secure:
        assert secure.certificates is not None
        issued = secure.certificates.issue("alice", {"CN": "alice"})
        for certificate, expected in ((None, ErrorCode.delegation_token_request_not_allowed),
                                      ((issued.certificate, issued.key), ErrorCode.none)):
            context = ssl.create_default_context(cafile=secure.certificates.location)
            if certificate is not None:
                context.load_cert_chain(*certificate)
            wire = Wire.__new__(Wire)
            wire.sock = context.wrap_socket(socket.create_connection(
                ("127.0.0.1", secure.server.listener_port("SSL")), timeout=10), server_hostname="localhost")
            wire.correlation = 0
            with wire:
                assert error_of(wire, DESCRIBE, 3, describe_body())[0] == expected


def reauthenticate(wire: Wire, token: Any) -> Any:
    """KIP-368 re-authentication with the token on an open connection: the final answer."""
    handshake(wire, "SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", token.token_id, password(token), token=True)
    first = authenticate(wire, client.first())
    return authenticate(wire, client.final(first.auth_bytes)) if first.error_code == ErrorCode.none else first


def wait_out(wire: Wire, seconds: float) -> None:
    """Let a session's lifetime pass on its socket (the broker sends nothing meanwhile), not with sleep."""
    wire.sock.settimeout(seconds)
    with pytest.raises(OSError):
        wire.sock.recv(1)
    wire.sock.settimeout(5)


def test_a_token_session_lives_on_only_if_the_token_was_renewed(broker: Broker) -> None:
    """The session ends when the token does; re-authenticating after a renewal keeps the connection."""
    with as_user(broker, "alice") as alice:
        token = create(alice)
        age(broker, 24 * HOUR_MS - 1500)  # the token has 1.5 s left
        kept, answer = login(broker, token.token_id, password(token), token=True)
        dropped, _ = login(broker, token.token_id, password(token), token=True)
        with kept, dropped:
            assert 0 < answer.session_lifetime.total_seconds() <= 1.5
            assert error_of(alice, RENEW, 2, renew_body(token.hmac, period_ms=HOUR_MS))[0] == ErrorCode.none
            wait_out(kept, 1.6)
            renewed = reauthenticate(kept, token)
            assert renewed.error_code == ErrorCode.none
            assert 3500 < renewed.session_lifetime.total_seconds() <= 3600
            assert kept.request(3, 1, request_class(3, 1)(topics=())).brokers
            wait_out(dropped, 0.1)
            dropped.send(3, 1, request_class(3, 1)(topics=()))
            assert dropped.is_closed()


def test_expired_tokens_leave_the_store_at_the_expiry_check(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkacompat.audit")
    with Broker(sasl=USERS, delegation_token_secret_key=SECRET, delegation_token_expiry_check_interval_ms=50) as short:
        wire, _ = login(short, "alice", USERS["alice"])
        with wire:
            token = create(wire)
        tokens = short.server.cluster.tokens
        age(short, 25 * HOUR_MS)
        deadline = time.monotonic() + 10
        while tokens.tokens() and time.monotonic() < deadline:  # no token request meanwhile: the check removes it
            time.sleep(0.02)
        assert tokens.tokens() == []
        assert any(f"removed past its expiry: token={token.token_id}" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("version", range(SUPPORTED[CREATE][0], SUPPORTED[CREATE][1] + 1))
def test_every_served_version_creates_and_describes(broker: Broker, version: int) -> None:
    with as_user(broker, "alice") as wire:
        made = wire.request(CREATE, version, create_body(version=version))
        assert made.error_code == ErrorCode.none and made.principal_name == "alice"
        answer = wire.request(DESCRIBE, version, describe_body(version=version, owners=("User:alice",)))
        shown = next(t for t in answer.tokens if t.token_id == made.token_id)
        assert shown.hmac == made.hmac
        if version >= 3:  # v3 names the requester (KIP-373)
            assert shown.token_requester_principal_name == "alice"
