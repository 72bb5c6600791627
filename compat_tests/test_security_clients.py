"""Every client family over SSL, SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512 and PLAIN): the right
password produces and consumes, a wrong one fails with the client's authentication error.

One broker serves all three listeners with a throwaway CA; each case is a
real client run or library call, bounded in time. Java and kafkajs cases run in
their drivers' long-lived JVM and node process (ProgramServer), each case with
clients of its own: a new JVM per case cost 2-4 s.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest

from kafkacompat.testing import Broker

from .drivers import ClientUnavailable
from .drivers.java import program_server
from .drivers.kafkajs import installed, node_server

pytestmark = pytest.mark.slow
USERS = {"alice": "alice-pw"}
CASES = [("SSL", None), ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"),
         ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
IDS = [f"{p}-{m}" if m else p for p, m in CASES]


@pytest.fixture(scope="module")
def broker():
    with Broker(sasl=USERS, tls=True,
                listeners=["SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"]) as running:
        yield running


class Target:
    """Where and how one case connects."""

    def __init__(self, broker: Broker, protocol: str, mechanism: str | None, password: str) -> None:
        self.protocol, self.mechanism, self.password = protocol, mechanism, password
        self.bootstrap = f"127.0.0.1:{broker.server.listener_port(protocol)}"
        self.ca = broker.certificates.location
        self.topic = f"secure-{uuid.uuid4().hex[:8]}"
        self.refusal_expected = password != USERS["alice"]  # the broker refuses the login at once

    def librdkafka(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol}
        if "SSL" in self.protocol:
            config["ssl.ca.location"] = self.ca
        if self.mechanism:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": "alice", "sasl.password": self.password})
        return config


def cases(right: bool):
    for (protocol, mechanism), case_id in zip(CASES, IDS):
        if not right and mechanism is None:
            continue  # SSL without client certificates has no password to get wrong
        yield pytest.param(protocol, mechanism, id=case_id)


# --- one function per client family: produce one message and read it back -------------------------

def run_kcat(t: Target) -> str:
    if shutil.which("kcat") is None:
        raise ClientUnavailable("kcat is not installed")
    flags = [arg for key, value in t.librdkafka().items() if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}")]
    sent = subprocess.run(["kcat", "-P", "-b", t.bootstrap, "-t", t.topic, *flags], input="hello-kcat\n", text=True,
                          capture_output=True, timeout=30)
    if sent.returncode:
        return "ERROR " + sent.stderr
    read = subprocess.run(["kcat", "-C", "-e", "-o", "beginning", "-b", t.bootstrap, "-t", t.topic, *flags],
                          text=True, capture_output=True, timeout=30)
    return f"OK {read.stdout.strip()}" if read.returncode == 0 else "ERROR " + read.stderr


def run_kafka_python(t: Target) -> str:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    options: dict[str, Any] = {"bootstrap_servers": t.bootstrap, "security_protocol": t.protocol}
    if "SSL" in t.protocol:
        options["ssl_cafile"] = t.ca
    if t.mechanism:
        options.update(sasl_mechanism=t.mechanism, sasl_plain_username="alice", sasl_plain_password=t.password)
    try:
        # kafka-python retries a refused bootstrap until this runs out (the refusal itself is in its log)
        producer = KafkaProducer(**options, max_block_ms=10000,
                                 bootstrap_timeout_ms=2000 if t.refusal_expected else 8000)
        producer.send(t.topic, b"hello-kafka-python").get(timeout=15)
        producer.close()
    except KafkaError as exc:
        return f"ERROR {type(exc).__name__}: {exc}"
    consumer = KafkaConsumer(t.topic, **options, auto_offset_reset="earliest", consumer_timeout_ms=15000)
    values = [m.value.decode() for _, m in zip(range(1), consumer)]  # the first message ends the wait
    consumer.close()
    return f"OK {values[0]}" if values else "ERROR nothing consumed"


def run_aiokafka(t: Target) -> str:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaError
    from aiokafka.helpers import create_ssl_context

    options: dict[str, Any] = {"bootstrap_servers": t.bootstrap, "security_protocol": t.protocol}
    if "SSL" in t.protocol:
        options["ssl_context"] = create_ssl_context(cafile=t.ca)
    if t.mechanism:
        options.update(sasl_mechanism=t.mechanism, sasl_plain_username="alice", sasl_plain_password=t.password)

    async def go() -> str:
        producer = AIOKafkaProducer(**options)
        try:
            await producer.start()
            await producer.send_and_wait(t.topic, b"hello-aiokafka")
        except KafkaError as exc:
            return f"ERROR {type(exc).__name__}: {exc}"
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(t.topic, **options, auto_offset_reset="earliest")
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), 15)
            return f"OK {message.value.decode()}"
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(go(), 60))


def run_kafkajs(t: Target) -> str:
    installed()
    settings = {"protocol": t.protocol, "mechanism": t.mechanism or "", "username": "alice", "password": t.password,
                "ca": t.ca}
    done = node_server().run("secure", [t.bootstrap, json.dumps(settings), t.topic], timeout=90)
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1]


def run_java(t: Target, tmp_path) -> str:
    lines = [f"security.protocol={t.protocol}"]
    if "SSL" in t.protocol:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={t.ca}"]
    if t.mechanism:
        module = "scram.ScramLoginModule" if t.mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        lines += [f"sasl.mechanism={t.mechanism}",
                  f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="alice" '
                  f'password="{t.password}";']
    props = tmp_path / "client.properties"
    props.write_text("\n".join(lines) + "\n")
    done = program_server().run("SecureClient", [t.bootstrap, str(props), t.topic], timeout=120)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "ERROR " + done.stderr[-500:]


def run_librdkafka(t: Target) -> str:
    from confluent_kafka import Consumer, KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer({**t.librdkafka(), "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce(t.topic, b"hello-librdkafka")
    deadline = time.monotonic() + 12
    while producer.flush(0.1) and not errors and time.monotonic() < deadline:
        pass  # delivered, or refused: error_cb hears of a failed login at once, not after message.timeout.ms
    if errors:
        return f"ERROR {errors[0].name()}: {errors[0].str()}"
    consumer = Consumer({**t.librdkafka(), "group.id": t.topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([t.topic])
    try:
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                return f"OK {message.value().decode()}"
    finally:
        consumer.close()
    return "ERROR nothing consumed"


CLIENTS = {"kcat": run_kcat, "kafka_python": run_kafka_python, "aiokafka": run_aiokafka, "kafkajs": run_kafkajs,
           "java": run_java, "librdkafka": run_librdkafka}
# what each client reports for a refused login (its own error type, carrying the broker's message where it can)
# kafka-python and aiokafka give up bootstrapping with a connection error; the refusal itself is in their log
REFUSED = {"kcat": "Authentication failure", "kafka_python": "ERROR", "aiokafka": "ERROR",
           "kafkajs": "KafkaJSSASLAuthenticationError", "java": "SaslAuthenticationException",
           "librdkafka": "_AUTHENTICATION"}


def run(client: str, target: Target, tmp_path) -> str:
    try:
        return CLIENTS[client](target, tmp_path) if client == "java" else CLIENTS[client](target)
    except ClientUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("client", [pytest.param(c, marks=getattr(pytest.mark, c)) for c in CLIENTS])
@pytest.mark.parametrize("protocol,mechanism", list(cases(right=True)))
def test_right_credentials_produce_and_consume(broker: Broker, client: str, protocol: str, mechanism: str | None,
                                               tmp_path) -> None:
    outcome = run(client, Target(broker, protocol, mechanism, USERS["alice"]), tmp_path)
    assert outcome.startswith("OK hello"), outcome


@pytest.mark.parametrize("client", [pytest.param(c, marks=getattr(pytest.mark, c)) for c in CLIENTS])
@pytest.mark.parametrize("protocol,mechanism", list(cases(right=False)))
def test_wrong_password_fails_with_the_authentication_error(broker: Broker, client: str, protocol: str,
                                                            mechanism: str, tmp_path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    outcome = run(client, Target(broker, protocol, mechanism, "wrong-pw"), tmp_path)
    assert outcome.startswith("ERROR") and REFUSED[client] in outcome, outcome
    if client in ("kafka_python", "aiokafka"):
        assert "SaslAuthenticationFailed" in caplog.text
