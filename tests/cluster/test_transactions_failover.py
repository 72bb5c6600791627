"""Transactions through a three-broker cloud cluster whose brokers die (kill -9), with Java kafka-clients.

- Markers are written by the transaction coordinator, which need not lead the
  partition: they carry the leader table's epoch, as produced batches do. A
  Java consumer commits the epoch of what it read (markers included) and,
  restarted after the partition's leader died, follows the new leader; with
  markers stamped above Metadata's epoch it ignored every later leader.
- An open transaction survives the kill -9 of its coordinator: the next
  coordinator loads it from the store and the producer's commitTransaction
  goes through it; read_committed consumers see exactly what was committed,
  and nothing hangs on the last stable offset.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from compat_tests.drivers import ClientUnavailable
from compat_tests.drivers.java import java_command
from kafkacompat.cluster.membership import coordinator_partition
from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable
from tests.cluster.test_shared_store import create_topic, leaders, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LEASE_MS, HEARTBEAT_MS = 2000, 200
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, as the brokers run


@pytest.fixture
def cluster_and_db() -> Iterator[tuple[BrokerCluster, str]]:
    try:
        command = java_command("ClusterTransactions")
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    try:
        args = cloud_cluster_args(LEASE_MS, HEARTBEAT_MS)
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(3, args) as running:
        running.java = command  # type: ignore[attr-defined]
        yield running, args[args.index("--store") + 1]


def java(cluster: BrokerCluster, *args: str, timeout: float = 120) -> dict:
    done = subprocess.run([*cluster.java, *args], capture_output=True, text=True, timeout=timeout,  # type: ignore[attr-defined]
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def leader_epochs(database: str, topic: str) -> dict[int, int]:
    """partition -> the leader table's epoch: what Metadata reports."""
    async def read() -> dict[int, int]:
        conn = await asyncpg.connect(database)
        try:
            rows = await conn.fetch("SELECT partition, epoch FROM kc_partition_leaders WHERE topic = $1", topic)
        finally:
            await conn.close()
        return {r["partition"]: r["epoch"] for r in rows}
    return asyncio.run(read())


def without(cluster: BrokerCluster, node: int) -> str:
    return ",".join(b.bootstrap for n, b in enumerate(cluster.brokers, 1) if n != node)


def moved_from(bootstrap: str, topic: str, partition: int, node: int) -> bool:
    try:
        return leaders(bootstrap, topic)[partition] not in (-1, node)
    except Exception:  # noqa: BLE001 - a broker between answers; ask again
        return False


def values(prefix: str, txns: int, per_txn: int) -> list[str]:
    return sorted(f"{prefix}-{t}-{i}" for t in range(txns) for i in range(per_txn))


def test_a_java_consumer_resumes_past_markers_and_follows_a_new_leader(cluster_and_db) -> None:
    cluster, database = cluster_and_db
    topic = create_topic(cluster.bootstrap, 3)
    group, txn = f"g-{topic}", f"tx-{topic}"
    assert java(cluster, "produce", cluster.bootstrap, topic, txn, "3", "9", "a") == {"committed": 27}
    first = java(cluster, "consume", cluster.bootstrap, topic, group, "27", "20000", "read_committed")
    assert sorted(first["values"]) == values("a", 3, 9)
    epochs = leader_epochs(database, topic)
    committed = {int(p): e for p, e in first["epochs"].items()}
    assert set(committed) == {0, 1, 2}
    # the position passed the markers; its epoch is Metadata's, never above it
    assert all(0 <= e <= epochs[p] for p, e in committed.items()), (committed, epochs)

    victim = leaders(cluster.bootstrap, topic)[0]
    cluster.broker(victim).kill()
    rest = without(cluster, victim)
    wait_until("partition 0 has a new leader", lambda: moved_from(rest, topic, 0, victim), 30)
    assert java(cluster, "produce", rest, topic, txn, "2", "9", "b") == {"committed": 18}
    started = time.monotonic()
    second = java(cluster, "consume", rest, topic, group, "18", "20000", "read_committed")
    # resumed from the commits, every partition read from its (new) leader, nothing twice
    assert sorted(second["values"]) == values("b", 2, 9)
    print(f"\nthe restarted Java consumer read 18 records in {time.monotonic() - started:.1f} s "
          f"(committed epochs {committed}, leader epochs {leader_epochs(database, topic)})")


def test_an_open_transaction_is_committed_through_the_next_coordinator_after_kill_9(cluster_and_db) -> None:
    cluster, database = cluster_and_db
    topic = create_topic(cluster.bootstrap, 3)
    txn = f"open-{uuid.uuid4().hex[:8]}"
    producer = subprocess.Popen([*cluster.java, "open_then_commit", cluster.bootstrap, topic, txn, "12", "o"],  # type: ignore[attr-defined]
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert producer.stdout is not None and producer.stdin is not None
        line = producer.stdout.readline()  # bounded by the test's timeout
        assert line.strip() == "OPEN", (line, producer.stderr.read() if producer.poll() is not None else "")
        index = coordinator_partition(txn, OFFSETS_PARTITIONS)
        node = leaders(cluster.bootstrap, "__consumer_offsets")[index]
        cluster.broker(node).kill()
        rest = without(cluster, node)
        wait_until("the coordinator's partition moved", lambda: moved_from(rest, "__consumer_offsets", index, node), 30)
        producer.stdin.write("go\n")
        producer.stdin.flush()
        out, err = producer.communicate(timeout=120)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    assert producer.returncode == 0, err[-3000:]
    outcome = json.loads(out.strip().splitlines()[-1])["outcome"]
    print(f"\ncommitTransaction after the kill -9 of coordinator {node}: {outcome}")
    assert outcome == "committed"

    # a later transaction of another producer: read_committed readers get past both, nothing hangs
    assert java(cluster, "produce", rest, topic, f"after-{txn}", "1", "6", "c") == {"committed": 6}
    seen = java(cluster, "consume", rest, topic, f"g-{txn}", "18", "15000", "read_committed")
    assert sorted(seen["values"]) == sorted([f"o-{i}" for i in range(12)] + values("c", 1, 6))


def test_consume_transform_produce_with_the_group_and_the_transaction_on_different_brokers(cluster_and_db) -> None:
    """sendOffsetsToTransaction reaches the group's coordinator, which stages the offsets in the
    store for the transaction's coordinator on another broker: kept at commit, dropped at abort."""
    from confluent_kafka.admin import AdminClient

    cluster, _ = cluster_and_db
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.describe_consumer_groups(["probe"])["probe"].result(30)  # FindCoordinator makes __consumer_offsets
    wait_until("__consumer_offsets has leaders",
               lambda: -1 not in leaders(cluster.bootstrap, "__consumer_offsets").values(), 30)
    placed = leaders(cluster.bootstrap, "__consumer_offsets")

    def broker_of(key: str) -> int:
        return placed[coordinator_partition(key, OFFSETS_PARTITIONS)]

    txn = f"ctp-{uuid.uuid4().hex[:8]}"
    group = next(g for g in (f"g{i}-{txn}" for i in range(100)) if broker_of(g) != broker_of(txn))
    topic = f"in-{txn}"
    done = subprocess.run([*cluster.java[:-1], "Transactions", "consume_transform_produce", cluster.bootstrap,  # type: ignore[attr-defined]
                           f"topic={topic}", f"group={group}", f"txn={txn}"],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r.split("=")[1] for r in out["output"]["records"]] == sorted(f"V{i}" for i in range(10))
    assert out["first_round"] == "aborted" and out["committed"] == {"0": 10}
