"""Java transactional producers and read_committed consumers: kafkacompat shows what Kafka 4.1 shows.

compat_tests/java/Transactions.java runs each scenario (commit and abort,
fencing by a second producer, a hanging transaction holding the LSO until
its timeout aborts it, consume-transform-produce with
sendOffsetsToTransaction) and prints what its consumers saw: values,
offsets (markers take offsets too), end offsets per isolation level and the
exceptions the producer got. The same program runs against Apache Kafka
4.1 and against kafkacompat, with kafka-clients 3.9.1 and 4.1.0, and the
two outputs must be equal.

kafkacompat serves transactions v1 (KIP-98; KIP-890's v2 protocol is not
offered, so clients do not use it), so the reference cluster is formatted
with transaction.version=1: a 4.1 client then runs the same protocol on
both. (On a transactions-v2 cluster the only visible difference in these
scenarios is the exception a producer gets after its transaction timed
out: InvalidTxnStateException instead of ProducerFencedException.)
"""

from __future__ import annotations

import functools
import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

from .conftest import compat_broker
from .drivers import ClientUnavailable
from .drivers.java import JVM_FLAGS, SOURCES, classpath, compile_sources
from .reference_kafka import ReferenceUnavailable, kafka_home, reference_kafka

pytestmark = pytest.mark.java
ABORT_CHECK_MS = "1000"  # how often both brokers look for timed-out transactions
CLIENT_JARS_41 = ("kafka-clients-4.1.0.jar", "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar",
                  "zstd-jni-1.5.6-10.jar", "slf4j-api-1.7.36.jar")


@functools.cache
def _program(client: str) -> list[str]:
    """`java ... Transactions` compiled against the chosen kafka-clients."""
    try:
        if client == "3.9.1":
            cp = classpath()
        else:
            libs = kafka_home() / "libs"
            cp = ":".join(str(libs / jar) for jar in CLIENT_JARS_41)
    except (ClientUnavailable, ReferenceUnavailable) as exc:
        pytest.skip(f"kafka-clients {client} unavailable: {exc}")
    classes = compile_sources([str(SOURCES / "Transactions.java")], cp)
    return ["java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", "Transactions"]


def _run(client: str, command: str, bootstrap: str, **options: str) -> dict:
    argv = [*_program(client), command, bootstrap, *(f"{k}={v}" for k, v in options.items())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=150, check=False)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"{command} on {bootstrap} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def kafka() -> Iterator[str | None]:
    """The reference broker, or None (then only kafkacompat's answers are checked)."""
    try:
        with reference_kafka({"transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_CHECK_MS},
                             features={"transaction.version": 1}) as b:
            yield b
    except ReferenceUnavailable:
        yield None


@pytest.fixture(scope="module")
def ours() -> Iterator[Broker]:
    with compat_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=int(ABORT_CHECK_MS)) as b:
        yield b


def _check_commit_abort(out: dict) -> None:
    assert not any("aborted" in r for r in out["read_committed"]["records"])
    assert sum("aborted" in r for r in out["read_uncommitted"]["records"]) == 3


def _check_fence(out: dict) -> None:
    assert out["topic"]["records"] == ["0:2=from-b"]  # the zombie's open transaction was aborted


def _check_hanging(out: dict) -> None:
    assert out["during"] == {"records": ["0:0=before"], "end_offsets": {"0": 1}}  # LSO at the open transaction
    assert out["after_timeout"]["records"] == ["0:0=before", "0:2=after"]
    assert out["commit_after_timeout"] == "ProducerFencedException"


def _check_consume_transform_produce(out: dict) -> None:
    assert [r.split("=")[1] for r in out["output"]["records"]] == sorted(f"V{i}" for i in range(10))
    assert out["first_round"] == "aborted" and out["committed"] == {"0": 10}


SCENARIOS = {
    "commit_abort": ({}, _check_commit_abort),
    "fence": ({}, _check_fence),
    "hanging": ({"timeout_ms": "1500"}, _check_hanging),
    "consume_transform_produce": ({}, _check_consume_transform_produce),
}
CASES = [(s, "3.9.1") for s in SCENARIOS] + [("commit_abort", "4.1.0"), ("hanging", "4.1.0")]


@pytest.mark.parametrize("scenario, client", CASES)
def test_transactions_same_as_kafka(kafka: str | None, ours: Broker, scenario: str, client: str) -> None:
    """What the program shows on kafkacompat means what it should, and equals Kafka's output."""
    name = f"tx-{scenario}-{uuid.uuid4().hex[:8]}"
    extra, check = SCENARIOS[scenario]
    options = {"topic": name, "txn": name, "group": name, **extra}
    mine = _run(client, scenario, ours.bootstrap_servers, **options)
    check(mine)
    if kafka is not None:
        assert mine == _run(client, scenario, kafka, **options)


def _kafka_transactions(bootstrap: str, *args: str) -> str:
    tool = kafka_home() / "bin" / "kafka-transactions.sh"
    done = subprocess.run([str(tool), "--bootstrap-server", bootstrap, *args], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_transactions_kafka_transactions_tool(ours: Broker) -> None:
    """kafka-transactions.sh list / describe / describe-producers on an open transaction."""
    from confluent_kafka import Producer

    try:
        kafka_home()
    except ReferenceUnavailable as exc:
        pytest.skip(str(exc))
    name = f"tx-tool-{uuid.uuid4().hex[:8]}"
    ours.create_topic(name, partitions=2)
    producer = Producer({"bootstrap.servers": ours.bootstrap_servers, "transactional.id": name})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(name, value=b"open", partition=1)
    producer.flush(10)
    listed = [line.split() for line in _kafka_transactions(ours.bootstrap_servers, "list").splitlines()]
    row = next(r for r in listed if r[0] == name)
    assert row[3] == "Ongoing"
    described = _kafka_transactions(ours.bootstrap_servers, "describe", "--transactional-id", name).splitlines()
    fields = dict(zip(described[0].split(), described[1].split()))
    assert fields["TransactionState"] == "Ongoing" and fields["TopicPartitions"] == f"{name}-1"
    assert fields["ProducerId"] == row[2]
    producers = _kafka_transactions(ours.bootstrap_servers, "describe-producers", "--topic", name,
                                    "--partition", "1").splitlines()
    cols = dict(zip(producers[0].split(), producers[1].split()))
    assert cols["ProducerId"] == row[2] and cols["CurrentTransactionStartOffset"] == "0"
    producer.abort_transaction(15)
