"""Delegation tokens as users use them, on Apache Kafka 4.1 and on kafkacompat, compared.

Both brokers have a SASL_PLAINTEXT listener with SCRAM users alice and bob,
a PLAINTEXT one, and the same delegation.token.secret.key. The same steps
run on each: kafka-delegation-tokens.sh --create / --describe / --renew /
--expire with alice's or bob's SCRAM login (and the tool's refusals over
PLAINTEXT and over a token login), and Kafka's Java producer and consumer
logging in with the token (SCRAM, tokenauth=true), before and after it is
expired. What the user sees is compared once the ids, HMACs and clock times
that differ by nature are taken out (the printed dates are kept as their
distances from the issue date).

Kafka applies a token change to the broker's token cache a moment after the
controller answers, so a step that depends on one waits until --describe
shows it (`seen`). How a renewal keeps a token alive past its first expiry
is shown on kafkacompat alone, whose clock the test can move.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkacompat.testing import Broker

from .drivers import ClientUnavailable
from .drivers.java import program_server
from .reference import KafkaTools, ReferenceKafka, kafka_home, on_both

pytestmark = [pytest.mark.differential, pytest.mark.kafka_tools, pytest.mark.java, pytest.mark.slow]

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
SECRET = "the-token-signing-secret"
DAY_MS = 24 * 3600 * 1000
ROW = re.compile(r"^(\S{22}) +(\S{88}) +(\S+) +(\S+) +(\[.*?\]) +(\S{16}) +(\S{16}) +(\S{16}) *$", re.M)
DATE = "%Y-%m-%dT%H:%M"


class TokenSide:
    """One broker as a token user reaches it: its SASL and PLAINTEXT addresses, the tools, a Java client."""

    def __init__(self, tools: KafkaTools, sasl: str, plaintext: str, name: str) -> None:
        self.tools, self.sasl, self.plaintext, self.name = tools, sasl, plaintext, name

    def config(self, username: str, password: str, token: bool = False, protocol: str = "SASL_PLAINTEXT") -> str:
        """A --command-config (and Java client) properties file logging in as a user or with a token."""
        lines = [f"security.protocol={protocol}"]
        if protocol != "PLAINTEXT":
            extra = ' tokenauth="true"' if token else ""
            lines += ["sasl.mechanism=SCRAM-SHA-256",
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{username}" password="{password}"{extra};']
        return self.tools.file(f"{self.name}-{uuid.uuid4().hex[:8]}.properties", "\n".join(lines) + "\n")

    def tokens(self, config: str, *args: str, plaintext: bool = False) -> tuple[int, str, str]:
        bootstrap = self.plaintext if plaintext else self.sasl
        done = self.tools.run("kafka-delegation-tokens", "--bootstrap-server", bootstrap, "--command-config", config, *args)
        return done.code, done.out, done.err

    def java(self, config: str) -> str:
        """Kafka's producer and consumer with these settings: OK <value>, or ERROR <exception>: <message>."""
        try:
            done = program_server().run("SecureClient", [self.sasl, config, f"tokens-{uuid.uuid4().hex[:8]}"],
                                        timeout=120)
        except ClientUnavailable as exc:
            pytest.skip(str(exc))
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "ERROR " + done.stderr[-500:]


def rows(out: str) -> list[tuple[Any, ...]]:
    """The token table the tool prints: owner, requester, renewers and the expiry and max dates as minutes
    after the issue date, sorted (Kafka lists tokens in hash order)."""
    found = []
    for match in ROW.finditer(out):
        issue, expiry, max_date = (datetime.datetime.strptime(match[i], DATE) for i in (6, 7, 8))
        found.append((match[3], match[4], match[5], (expiry - issue).total_seconds() // 60,
                      (max_date - issue).total_seconds() // 60))
    return sorted(found)


def shown(step: tuple[int, str, str]) -> tuple[Any, ...]:
    """A tool step as the user sees it, with ids, HMACs and dates taken out, its table as rows()."""
    code, out, err = step
    text = ROW.sub("<token>", out)
    text = re.sub(r"tokenId : \S{22}", "tokenId : <id>", text)
    text = re.sub(r"hmac :\S+", "hmac :<hmac>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d", "<date>", text)
    errors = sorted(set(re.findall(r"errors\.(\w+Exception)", out + err)))
    return code, re.sub(r"[ \t]+", " ", text).strip(), errors, rows(out)


def created(step: tuple[int, str, str]) -> tuple[str, str]:
    """(token id, base64 HMAC) of a --create step."""
    match = ROW.search(step[1])
    assert step[0] == 0 and match, step
    return match[1], match[2]


def seen(side: TokenSide, config: str, token_id: str, present: bool, timeout: float = 30.0) -> None:
    """Wait until alice's --describe shows (or no longer shows) the token: Kafka's broker applies token
    changes a moment after its controller answered."""
    deadline = time.monotonic() + timeout
    while (token_id in side.tokens(config, "--describe", "--owner-principal", "User:alice")[1]) != present:
        if time.monotonic() > deadline:
            return  # compared as it stands: the next steps show the difference
        time.sleep(0.2)


@pytest.fixture(scope="module")
def brokers(kafka_tools: KafkaTools) -> Iterator[tuple[dict[str, TokenSide], Broker]]:
    kafka = ReferenceKafka(kafka_home(), sasl_users=USERS, **{"delegation.token.secret.key": SECRET})
    with kafka, Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"],
                       delegation_token_secret_key=SECRET) as mine:
        yield {"kafka": TokenSide(kafka_tools, f"127.0.0.1:{kafka.sasl_port}", kafka.bootstrap_servers, "kafka"),
               "kafkacompat": TokenSide(kafka_tools, f"127.0.0.1:{mine.server.listener_port('SASL_PLAINTEXT')}",
                                        f"127.0.0.1:{mine.server.listener_port('PLAINTEXT')}", "kafkacompat")}, mine


def journey(side: TokenSide) -> dict[str, Any]:
    """A token's life as the tools and a Java client show it."""
    alice, bob = side.config("alice", USERS["alice"]), side.config("bob", USERS["bob"])
    steps: dict[str, Any] = {}
    step = side.tokens(side.config("", "", protocol="PLAINTEXT"), "--create", "--max-life-time-period", "-1",
                       plaintext=True)
    steps["create over PLAINTEXT"] = shown(step)
    step = side.tokens(alice, "--create", "--renewer-principal", "User:bob", "--max-life-time-period", "-1")
    steps["create"] = shown(step)
    token_id, mac = created(step)
    seen(side, alice, token_id, True)
    steps["describe own"] = shown(side.tokens(alice, "--describe", "--owner-principal", "User:alice"))
    steps["describe no owner"] = shown(side.tokens(alice, "--describe"))
    steps["describe as renewer"] = shown(side.tokens(bob, "--describe", "--owner-principal", "User:alice"))
    steps["renew as renewer"] = shown(side.tokens(bob, "--renew", "--hmac", mac, "--renew-time-period", "3600000"))
    steps["renew unknown"] = shown(side.tokens(alice, "--renew", "--hmac", "AAAA", "--renew-time-period", "-1"))
    with_token = side.config(token_id, mac, token=True)
    steps["create with a token login"] = shown(side.tokens(with_token, "--create", "--max-life-time-period", "-1"))
    steps["java with the token"] = side.java(with_token)
    steps["expire as bob"] = shown(side.tokens(bob, "--expire", "--hmac", mac, "--expiry-time-period", "-1"))
    seen(side, alice, token_id, False)
    steps["describe after expire"] = shown(side.tokens(alice, "--describe", "--owner-principal", "User:alice"))
    steps["java with the expired token"] = side.java(with_token)
    steps["create for carol"] = shown(side.tokens(alice, "--create", "--owner-principal", "User:carol",
                                                       "--max-life-time-period", str(2 * DAY_MS)))
    return steps


def test_token_life_as_kafka(brokers: tuple[dict[str, TokenSide], Broker]) -> None:
    sides, _ = brokers
    runs = on_both(sides, journey)
    mine, theirs = runs["kafkacompat"], runs["kafka"]
    assert theirs["java with the token"] == "OK hello-java"  # the reference did what the test means
    assert theirs["create"][3] == [("User:alice", "User:alice", "[User:bob]", 24 * 60, 7 * 24 * 60)]
    for step in theirs:
        assert (step, mine[step]) == (step, theirs[step])


def aged(broker: Broker, by_ms: int) -> Callable[[], float]:
    """Move kafkacompat's token clock `by_ms` ahead of the real one (the tokens' own clock only)."""
    tokens = broker.server.cluster.tokens
    tokens.clock = lambda: time.time() + by_ms / 1000
    return tokens.clock


def test_a_renewed_token_outlives_its_first_expiry(brokers: tuple[dict[str, TokenSide], Broker]) -> None:
    """A token lives a day unless renewed: renewed after 23 h, it still logs in at 25 h; not renewed, not."""
    sides, broker = brokers
    side = sides["kafkacompat"]
    alice = side.config("alice", USERS["alice"])
    renewed, left = (created(side.tokens(alice, "--create", "--max-life-time-period", "-1")) for _ in range(2))
    try:
        aged(broker, 23 * 3600 * 1000)
        assert side.tokens(alice, "--renew", "--hmac", renewed[1], "--renew-time-period", "-1")[0] == 0
        aged(broker, 25 * 3600 * 1000)
        assert side.java(side.config(*renewed, token=True)) == "OK hello-java"
        refused = side.java(side.config(*left, token=True))
        assert refused == ("ERROR SaslAuthenticationException: Authentication failed during authentication due to "
                           "invalid credentials with SASL mechanism SCRAM-SHA-256")
        code, out, err = side.tokens(alice, "--renew", "--hmac", left[1], "--renew-time-period", "-1")
        assert code == 1 and "DelegationTokenExpiredException" in out + err
        code, out, err = side.tokens(alice, "--renew", "--hmac", left[1], "--renew-time-period", "-1")
        assert code == 1 and "DelegationTokenNotFoundException" in out + err  # removed once seen expired
    finally:
        broker.server.cluster.tokens.clock = time.time


def test_token_broker_configs_as_kafka(brokers: tuple[dict[str, TokenSide], Broker]) -> None:
    """kafka-configs --describe --all shows the token lifetimes and check interval as Kafka does."""
    sides, _ = brokers

    def lifetimes(side: TokenSide) -> list[str]:
        done = side.tools.run("kafka-configs", "--bootstrap-server", side.sasl, "--command-config",
                              side.config("alice", USERS["alice"]), "--describe", "--entity-type", "brokers",
                              "--entity-name", "1", "--all")
        return sorted(line.strip() for line in done.out.splitlines()
                      if line.strip().startswith(("delegation.token.max", "delegation.token.expiry")))

    runs = on_both(sides, lambda side: {"configs": lifetimes(side)})
    assert len(runs["kafka"]["configs"]) == 3
    assert runs["kafkacompat"] == runs["kafka"]
