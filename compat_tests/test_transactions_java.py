"""Java transactional producers and read_committed consumers: kafkacompat shows what Kafka 4.1 shows.

compat_tests/java/Transactions.java runs each scenario (commit and abort,
fencing by a second producer, a hanging transaction holding the LSO until
its timeout aborts it, consume-transform-produce with
sendOffsetsToTransaction) and prints what its consumers saw: values,
offsets (markers take offsets too), end offsets per isolation level and the
exceptions the producer got. The same program runs against Apache Kafka
4.1 and against kafkacompat, with kafka-clients 3.9.1 and 4.1.0, and the
two outputs must be equal.

kafkacompat finalizes transaction.version 2 (KIP-890 part 2), as a new Kafka
4.1 cluster does, and so is the reference cluster formatted: kafka-clients
4.1.0 then runs the v2 protocol on both (no AddPartitionsToTxn, a new epoch
at every EndTxn v5), 3.9.1 the v1 protocol on a v2 broker. The tests check
that the 4.1 client really spoke v2 to kafkacompat (EndTxn v5, no
AddPartitionsToTxn) and 3.9.1 v1.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker

from .conftest import compat_broker
from .drivers import ClientUnavailable
from .drivers.java import JVM_FLAGS, classpath, compiled, kafka_clients_version, program_41, run_program
from .reference import kafka_home, module_reference_kafka, run_tool, side_by_side

ABORT_CHECK_MS = "1000"  # how often both brokers look for timed-out transactions


@functools.cache
def _program(client: str) -> tuple[str, ...]:
    """`java ... Transactions` compiled against the chosen kafka-clients."""
    if client != "3.9.1":
        return program_41("Transactions")
    try:  # the session's compiled compat_tests/java (the scenario driver's), Transactions among them
        cp, classes = classpath(), compiled()
        if kafka_clients_version() != client:  # KAFKACOMPAT_JAVA_CLIENT_LIBS chose another
            pytest.skip(f"the Java driver runs kafka-clients {kafka_clients_version()}, not {client}")
    except ClientUnavailable as exc:
        pytest.skip(f"kafka-clients {client} unavailable: {exc}")
    return ("java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", "Transactions")


def _run(client: str, command: str, bootstrap: str, **options: str) -> dict:
    return run_program(_program(client), command, bootstrap, **options)


@pytest.fixture(scope="module")
def kafka() -> Iterator[str | None]:
    """The reference broker, or None (then only kafkacompat's answers are checked)."""
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_CHECK_MS,
                "group.initial.rebalance.delay.ms": 0}
    yield from module_reference_kafka({"transaction.version": 2}, **settings)


@pytest.fixture(scope="module")
def ours() -> Iterator[Broker]:
    with compat_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=int(ABORT_CHECK_MS)) as b:
        yield b


def _check_commit_abort(out: dict, client: str) -> None:
    assert not any("aborted" in r for r in out["read_committed"]["records"])
    assert sum("aborted" in r for r in out["read_uncommitted"]["records"]) == 3


def _check_fence(out: dict, client: str) -> None:
    assert out["topic"]["records"] == ["0:2=from-b"]  # the zombie's open transaction was aborted


def _check_hanging(out: dict, client: str) -> None:
    assert out["during"] == {"records": ["0:0=before"], "end_offsets": {"0": 1}}  # LSO at the open transaction
    assert out["after_timeout"]["records"] == ["0:0=before", "0:2=after"]
    # v1: the abort's new epoch fences the producer; v2: its EndTxn reads as a retry of that abort
    expected = "InvalidTxnStateException" if client == "4.1.0" else "ProducerFencedException"
    assert out["commit_after_timeout"] == expected


def _check_consume_transform_produce(out: dict, client: str) -> None:
    assert [r.split("=")[1] for r in out["output"]["records"]] == sorted(f"V{i}" for i in range(10))
    assert out["first_round"] == "aborted" and out["committed"] == {"0": 10}


SCENARIOS = {
    "commit_abort": ({}, _check_commit_abort),
    "fence": ({}, _check_fence),
    # long enough that both reads "during" the open transaction finish before its timeout aborts
    # it, even on a loaded machine (at 1.5 s one broker had written the abort marker before the
    # read_uncommitted read and the other had not)
    "hanging": ({"timeout_ms": "6000"}, _check_hanging),
    "consume_transform_produce": ({}, _check_consume_transform_produce),
    # a KIP-848 consumer: its group metadata names its member epoch, which TxnOffsetCommit carries
    "consume_transform_produce_kip848": ({"group_protocol": "consumer"}, _check_consume_transform_produce),
}
CASES = [(s, client) for client in ("3.9.1", "4.1.0") for s in SCENARIOS]
ADD_PARTITIONS_TO_TXN, END_TXN = 24, 26


def _requests(broker: Broker, api_key: int) -> dict[int, int]:
    """version -> how many requests of `api_key` the broker has served."""
    counts = broker.server.cluster.stats.requests
    return {version: n for (key, version), n in list(counts.items()) if key == api_key}


def _check_protocol(client: str, before: dict[int, dict[int, int]], after: dict[int, dict[int, int]]) -> None:
    """4.1 clients speak transactions v2 to kafkacompat (EndTxn v5, no AddPartitionsToTxn), 3.9.1 v1."""
    def new(api_key: int) -> dict[int, int]:
        return {v: n - before[api_key].get(v, 0) for v, n in after[api_key].items() if n > before[api_key].get(v, 0)}

    end_txn = new(END_TXN)
    if client == "4.1.0":
        assert set(end_txn) == {5} and not new(ADD_PARTITIONS_TO_TXN), (end_txn, new(ADD_PARTITIONS_TO_TXN))
    else:
        assert end_txn and 5 not in end_txn and new(ADD_PARTITIONS_TO_TXN), end_txn


@pytest.mark.java
@pytest.mark.parametrize("scenario, client", CASES)
def test_transactions_same_as_kafka(kafka: str | None, ours: Broker, scenario: str, client: str) -> None:
    """What the program shows on kafkacompat means what it should, and equals Kafka's output."""
    name = f"tx-{scenario}-{uuid.uuid4().hex[:8]}"
    extra, check = SCENARIOS[scenario]
    options = {"topic": name, "txn": name, "group": name, **extra}
    before = {key: _requests(ours, key) for key in (ADD_PARTITIONS_TO_TXN, END_TXN)}

    def steps(bootstrap: str) -> tuple[dict, dict[str, str] | None]:
        """The program's output, and kafka-transactions describe when there is a Kafka to compare with."""
        return _run(client, scenario.removesuffix("_kip848"), bootstrap, **options), None if kafka is None else _describe(bootstrap, name)

    (mine, described), theirs = side_by_side(steps, ours.bootstrap_servers, kafka)
    # (describe asks FindCoordinator and DescribeTransactions only: the counts are the program's)
    _check_protocol(client, before, {key: _requests(ours, key) for key in (ADD_PARTITIONS_TO_TXN, END_TXN)})
    check(mine, client)
    if theirs is not None:
        assert (mine, described) == theirs


@pytest.mark.java
@pytest.mark.slow
def test_a_4_1_producer_follows_the_transaction_version_kafka_features_sets() -> None:
    """`kafka-features downgrade --feature transaction.version=1` at run time: the next 4.1 producer
    speaks transactions v1 (AddPartitionsToTxn, EndTxn before v5); upgraded back to 2, v2 again."""
    kafka_home()  # skips without the Kafka 4.1 distribution
    with compat_broker() as broker:
        def features(*args: str) -> None:
            done = run_tool("kafka-features", "--bootstrap-server", broker.bootstrap_servers, *args)
            assert done.returncode == 0, done.stderr[-2000:]

        def spoken() -> tuple[set[int], int]:
            """(EndTxn versions, AddPartitionsToTxn requests) of one commit_abort run."""
            name = f"tx-features-{uuid.uuid4().hex[:8]}"
            before = {key: _requests(broker, key) for key in (ADD_PARTITIONS_TO_TXN, END_TXN)}
            _check_commit_abort(_run("4.1.0", "commit_abort", broker.bootstrap_servers, topic=name, txn=name,
                                     group=name), "4.1.0")
            after = {key: _requests(broker, key) for key in (ADD_PARTITIONS_TO_TXN, END_TXN)}
            grown = {key: {v for v, n in after[key].items() if n > before[key].get(v, 0)} for key in after}
            added = sum(after[ADD_PARTITIONS_TO_TXN].values()) - sum(before[ADD_PARTITIONS_TO_TXN].values())
            return grown[END_TXN], added

        features("downgrade", "--feature", "transaction.version=1")
        end_txn, added = spoken()
        assert 5 not in end_txn and added > 0, (end_txn, added)
        features("upgrade", "--feature", "transaction.version=2")
        assert spoken() == ({5}, 0)


VOLATILE = ("CoordinatorId", "ProducerId", "TransactionStartTimeMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs")


def _describe(bootstrap: str, txn_id: str) -> dict[str, str]:
    """What `kafka-transactions.sh describe` shows of a transactional id, less ids and times.

    The epoch is what tells the protocols apart: a v2 producer's epoch
    grows with every transaction, a v1 producer's only at InitProducerId.

    Kafka answers EndTxn (and aborts a timed-out transaction) once PrepareCommit or PrepareAbort
    is in its transaction log, and logs the Complete state after the markers are written: the
    state is read until it is no longer a Prepare one (30 s at most; a broker stuck there shows
    it, and the comparison fails).
    """
    deadline = time.monotonic() + 30
    while True:
        lines = _kafka_transactions(bootstrap, "describe", "--transactional-id", txn_id).splitlines()
        fields = dict(zip(lines[0].split(), lines[1].split()))
        if not fields["TransactionState"].startswith("Prepare") or time.monotonic() > deadline:
            return {k: v for k, v in fields.items() if k not in VOLATILE}
        time.sleep(0.2)


def _kafka_transactions(bootstrap: str, *args: str) -> str:
    """kafka-transactions.sh ARGS in the session's warm tool runner (a JVM start per call cost 2-10 s)."""
    done = run_tool("kafka-transactions", "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.java
def test_transactions_kafka_transactions_tool(ours: Broker) -> None:
    """kafka-transactions.sh list / describe / describe-producers on an open transaction."""
    from confluent_kafka import Producer

    kafka_home()  # skips without the Kafka 4.1 distribution
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


def _wire_answers(bootstrap: str, name: str) -> list[tuple[object, ...]]:
    """Kafka's error codes for the transactional requests clients never send wrong, step by step."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.groups.test_groups_protocol import find_coordinator
    from tests.test_transactions_protocol import add_partitions, end_txn, fetch, init, produce_txn, txn_batch
    from tests.wire import Wire

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    out: list[tuple[object, ...]] = []
    with Wire(bootstrap) as w:
        deadline = time.monotonic() + 60
        while fetch(w, name, 0).error_code != ErrorCode.none:  # the new topic's leader is in place
            assert time.monotonic() < deadline, f"topic {name} has no leader on {bootstrap}"
            time.sleep(0.2)
        while True:  # Kafka creates and loads its transaction log on first use
            find_coordinator(w, 4, [name], key_type=1)
            started = init(w, name)
            if started.error_code == ErrorCode.none or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        pid, ep = started.producer_id, started.producer_epoch
        out.append(("init", started.error_code, ep))
        out.append(("timeout 0", init(w, name + "-x", timeout_ms=0).error_code))
        out.append(("timeout over max", init(w, name + "-x", timeout_ms=900_001).error_code))
        out.append(("batch outside its transaction", produce_txn(w, name, name, txn_batch(pid, ep, 0, b"x"))))
        out.append(("batch without transactional id", produce_txn(w, None, name, txn_batch(pid, ep, 0, b"x"))))
        out.append(("EndTxn with nothing open", end_txn(w, name, pid, ep, True)))
        out.append(("add unknown partition", sorted(add_partitions(w, name, pid, ep, name, partitions=(0, 7)))))
        out.append(("add", add_partitions(w, name, pid, ep, name)))
        out.append(("produce in transaction", produce_txn(w, name, name, txn_batch(pid, ep, 0, b"in"))))
        out.append(("InitProducerId while open", init(w, name).error_code))
        deadline = time.monotonic() + 30
        while True:  # Kafka aborts in the background; wait until it answers the retry
            again = init(w, name)
            if again.error_code != ErrorCode.concurrent_transactions or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out.append(("InitProducerId retried", again.error_code, again.producer_epoch - ep))
        out.append(("zombie produce", produce_txn(w, name, name, txn_batch(pid, ep, 1, b"zombie"))))
        out.append(("zombie add v3", add_partitions(w, name, pid, ep, name, version=3)))
        out.append(("zombie add v1", add_partitions(w, name, pid, ep, name, version=1)))
        out.append(("zombie EndTxn v3", end_txn(w, name, pid, ep, True, version=3)))
        out.append(("zombie EndTxn v1", end_txn(w, name, pid, ep, True, version=1)))
        out.append(("unknown producer id", add_partitions(w, name, pid + 1, again.producer_epoch, name)))
        out.append(("KIP-360 stale epoch v4", init(w, name, pid=pid, epoch=ep).error_code))
        out.append(("KIP-360 stale epoch v3", init(w, name, version=3, pid=pid, epoch=ep).error_code))
        answer = fetch(w, name, 1)
        out.append(("read_committed fetch", answer.high_watermark, answer.last_stable_offset,
                    [a.first_offset for a in answer.aborted_transactions]))
    return out


def test_transactions_wire_errors_same_as_kafka(kafka: str | None, ours: Broker) -> None:
    if kafka is None:
        pytest.skip("no reference Kafka to compare with")
    name = f"tx-wire-{uuid.uuid4().hex[:8]}"
    assert _wire_answers(ours.bootstrap_servers, name) == _wire_answers(kafka, name)
