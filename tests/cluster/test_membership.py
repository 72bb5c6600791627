"""Broker processes registering in one PostgreSQL database: who is live, who is controller.

These brokers keep their data in memory (each its own): they show
membership only. Data through a shared store is tests/cluster/test_shared_store.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from kafkacompat.testing.cluster import BrokerCluster, broker_process, listed_by
from kafkacompat.testing.services import Postgres
from tests.test_api_versions import finalized_transaction_version

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LEASE_MS, HEARTBEAT_MS = 2000, 200


def args(postgres: Postgres) -> list[str]:
    return ["--data-dir", "memory://", "--cluster-url", postgres.url(),
            "--cluster-lease-ms", str(LEASE_MS), "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]


def describe(bootstrap: str) -> tuple[set[int], int]:
    """(broker ids, controller id) as the Admin API reports them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {node.id for node in found.nodes}, found.controller.id


def metadata(bootstrap: str) -> tuple[set[int], int] | None:
    """(broker ids, controller id) from a Metadata request to this one broker; None if it did not answer."""
    return listed_by(bootstrap)


def wait_until(what: str, check, timeout: float) -> float:
    """Seconds until check() held; fails naming `what` after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout} s")


@pytest.fixture
def cluster(postgres: Postgres) -> Iterator[BrokerCluster]:
    with BrokerCluster(3, args(postgres)) as running:
        yield running


def test_every_broker_lists_all_three_with_the_lowest_id_as_controller(cluster: BrokerCluster) -> None:
    for broker in cluster.brokers:
        assert describe(broker.bootstrap) == ({1, 2, 3}, 1)


def test_a_cluster_finalizes_transactions_v1(cluster: BrokerCluster) -> None:
    """Java 4.x producers then add partitions with AddPartitionsToTxn at the coordinator, which works
    whichever broker leads a partition; a single broker finalizes 2 (tests/test_api_versions.py)."""
    for broker in cluster.brokers:
        assert finalized_transaction_version(broker.bootstrap) == 1


def test_a_killed_broker_leaves_within_its_lease_and_may_come_back(cluster: BrokerCluster) -> None:
    first, second = cluster.brokers[0], cluster.brokers[1]
    first.kill()
    gone = wait_until("broker 1 dropped from the live list",
                      lambda: metadata(second.bootstrap) == ({2, 3}, 2), timeout=LEASE_MS / 1000 + 5)
    # the bound is lease + heartbeat; the rest is slack for Metadata round trips on a loaded machine
    assert gone <= (LEASE_MS + HEARTBEAT_MS) / 1000 + 1.5, f"broker 1 was listed {gone:.2f} s after kill -9"
    first.start()  # same node id: waits for the old lease, which has lapsed
    wait_until("broker 1 listed again", lambda: metadata(second.bootstrap) == ({1, 2, 3}, 1),
               timeout=HEARTBEAT_MS / 1000 + 5)  # the others see it at their next heartbeat


def test_a_second_broker_with_a_live_node_id_is_refused_in_one_line(
    cluster: BrokerCluster, postgres: Postgres
) -> None:
    twin = broker_process(2, args(postgres))
    try:
        with pytest.raises(RuntimeError) as refused:
            twin.start()
        output = str(refused.value).splitlines()  # "cluster ... exited with 2: " + the process's output
        refusal = [line[line.index("kafkacompat: "):] for line in output if "kafkacompat: " in line]
    finally:
        twin.close()
    assert refusal == ["kafkacompat: node id 2 is held by a live broker at 127.0.0.1:"
                       f"{cluster.brokers[1].port}; give each broker its own --node-id"]
    assert metadata(cluster.brokers[0].bootstrap) == ({1, 2, 3}, 1)


def test_a_cleanly_stopped_broker_leaves_at_once(cluster: BrokerCluster) -> None:
    cluster.brokers[2].stop()
    left = wait_until("broker 3 dropped", lambda: (metadata(cluster.brokers[0].bootstrap) or (set(), 0))[0] == {1, 2},
                      timeout=5)  # None: that broker did not answer this time
    assert left < LEASE_MS / 1000, "a clean stop gives its lease back instead of letting it lapse"


LONG_LEASE_MS = 10_000


@pytest.fixture
def long_lease(postgres: Postgres) -> Iterator[BrokerCluster]:
    database = postgres.create_database()
    with BrokerCluster(3, ["--data-dir", "memory://", "--cluster-url", database, "--cluster-lease-ms",
                           str(LONG_LEASE_MS), "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]) as running:
        yield running


def test_a_killed_brokers_lease_ends_when_its_database_session_does(long_lease: BrokerCluster) -> None:
    """kill -9 ends the broker's database session, and with it the advisory lock it holds there:
    the others end its lease within a few heartbeats instead of waiting the whole lease (issue 37)."""
    long_lease.brokers[0].kill()
    gone = wait_until("broker 1 dropped from the live list",
                      lambda: metadata(long_lease.brokers[1].bootstrap) == ({2, 3}, 2), timeout=LONG_LEASE_MS / 1000)
    assert gone < LONG_LEASE_MS / 2000, f"broker 1 was listed {gone:.2f} s after kill -9"
    long_lease.brokers[0].start()  # its node id is free at once
    wait_until("broker 1 listed again", lambda: metadata(long_lease.brokers[1].bootstrap) == ({1, 2, 3}, 1), 10)


def test_brokers_whose_database_sessions_were_cut_stay_in_the_cluster(long_lease: BrokerCluster,
                                                                      postgres: Postgres) -> None:
    """A live broker that only lost its connections (a database restart, an administrator's
    pg_terminate_backend) connects again and renews at once: nobody takes it for dead."""
    database = long_lease.brokers[0].extra[long_lease.brokers[0].extra.index("--cluster-url") + 1]
    name = database.rsplit("/", 1)[1]
    postgres.sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' "
                 "AND pid <> pg_backend_pid()")
    deadline = time.monotonic() + 8 * HEARTBEAT_MS / 1000
    while time.monotonic() < deadline:
        for broker in long_lease.brokers:
            seen = metadata(broker.bootstrap)
            assert seen in (({1, 2, 3}, 1), None), f"broker at {broker.bootstrap} answered {seen}; " + "\n".join(
                f"--- {b.name} ---\n{b.output()}" for b in long_lease.brokers)
        time.sleep(0.05)
