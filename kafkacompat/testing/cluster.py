"""Broker processes that form one cluster over a shared PostgreSQL store (tests, benchmark).

Each broker is a `ClusterProcess` (a real `python -m kafkacompat serve`, so
kill -9 means what it says) with its own --node-id; all share the store
arguments given and the AWS_* variables of os.environ.
"""

from __future__ import annotations

import concurrent.futures
import tempfile
import time
from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .cluster_process import ClusterProcess
from .services import cloud_store

# Lease and heartbeat of test clusters: a dead broker's partitions move within about 2 s.
TEST_LEASE_MS, TEST_HEARTBEAT_MS = 2000, 200


def listed_by(bootstrap: str, tries: int = 10) -> tuple[set[int], int] | None:
    """(broker ids, controller id) as the broker at `bootstrap` itself answers Metadata; None when it
    did not answer. A client's Metadata goes to any broker it knows of, and a new client may learn
    of the others before it asks (librdkafka looks itself): an answer another broker gave is asked
    again, with a new client, up to `tries` times."""
    for _ in range(tries):
        try:
            found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
        except KafkaException:
            return None
        if found.orig_broker_name.startswith(f"{bootstrap}/"):
            return set(found.brokers), found.controller_id
    return None


def broker_process(node_id: int, store_args: Sequence[str], cluster_name: str = "scaleout") -> ClusterProcess:
    """Broker `node_id` of a cluster; its --data-dir is unused by a postgresql:// store but must exist
    (made here, removed when the broker is closed: a full test run left hundreds in /tmp)."""
    data_dir = tempfile.mkdtemp(prefix=f"kafkacompat-broker{node_id}-")
    return ClusterProcess(cluster_name, data_dir, "--node-id", str(node_id), *store_args, owns_data_dir=True)


def cloud_cluster_args(lease_ms: int = TEST_LEASE_MS, heartbeat_ms: int = TEST_HEARTBEAT_MS) -> list[str]:
    """`serve` arguments for brokers of a new cluster on a fresh cloud store (`cloud_store()`).

    The store batches produced records for 5 ms (not 10) so tests wait less
    per acks=all round trip. Raises ServiceUnavailable when PostgreSQL or
    moto is missing.
    """
    database, objects = cloud_store()
    return ["--store", database, "--object-store", objects, "--store-flush-ms", "5",
            "--cluster-lease-ms", str(lease_ms), "--cluster-heartbeat-ms", str(heartbeat_ms)]


class BrokerCluster:
    """Brokers 1..n sharing `store_args` (--store and --object-store, or --cluster-url)."""

    def __init__(self, count: int, store_args: Sequence[str]) -> None:
        self.brokers = [broker_process(node_id, store_args) for node_id in range(1, count + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, node_id: int) -> ClusterProcess:
        return self.brokers[node_id - 1]

    def start(self) -> "BrokerCluster":
        """Start every broker side by side (each waits for the database, not for the others)."""
        try:
            with concurrent.futures.ThreadPoolExecutor(len(self.brokers)) as pool:
                for started in [pool.submit(b.start) for b in self.brokers]:
                    started.result()
            self.wait_formed()
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, node_id: int) -> None:
        """Stop broker `node_id` cleanly and start it again on the same port and store; return
        once every broker lists it again. Its partitions move to the others at their next
        heartbeat and come back once it is their preferred leader again."""
        broker = self.broker(node_id)
        broker.stop()
        broker.start()
        self.wait_formed()

    def wait_formed(self, timeout: float = 30) -> None:
        """Return once every broker's Metadata lists them all: each learns of the others at its
        next heartbeat, so a broker listening is not yet a broker that knows its peers. Each
        broker's own answer counts (`listed_by`): one client for all the looks sent them to any
        broker it had learned of, and a broker that did not list the others yet passed on another's
        answer (the likely cause of a membership test in CI seeing one answer without broker 3)."""
        want = set(range(1, len(self.brokers) + 1))
        deadline = time.monotonic() + timeout
        for broker in self.brokers:
            while True:
                found = listed_by(broker.bootstrap)
                if found is not None and found[0] == want:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker at {broker.bootstrap} does not list brokers {sorted(want)}")
                time.sleep(0.05)

    def stop(self) -> None:
        for broker in self.brokers:
            broker.close()

    def __enter__(self) -> "BrokerCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
