"""Where a compat scenario runs: the in-process test broker, or three broker processes as one cluster.

Clients only get `target.bootstrap`. What only the broker side can tell (the
batches as stored, whether a topic is gone, which broker leads a partition)
and setting up a topic as an operator would go through the target:

- `InProcessTarget` answers from the broker's store, in the test process;
- `ClusterTarget` (three `kafkacompat serve` processes on one PostgreSQL +
  S3 store, kafkacompat/testing/cluster.py) has its store in other
  processes, so it answers through the Kafka API: Metadata from every
  broker, CreateTopics, and Fetch from the partition's leader, which hands
  out the batches exactly as stored (producer ids, sequences, codec);
- `WorkersTarget` (`kafkacompat serve --workers 2` over one disk store, run
  with `--on-workers`) answers the same way through its worker processes.
"""

from __future__ import annotations

import datetime
import time

from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import BatchHeader, split_batches
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from kafkacompat.testing.cluster import BrokerCluster
from tests.wire import Wire

SETTLE_S = 15.0  # seconds a change may take to reach every broker's Metadata (leaders, topic lists)
FETCH_BYTES = 16 << 20

# The client families whose scenarios also run against the cluster. What a cluster adds over
# one broker is on the client's side: following Metadata to each partition's leader, finding
# a group's coordinator on another broker, retrying when either moves. Every client library
# runs them; kcat alone does not, being librdkafka's command-line client (its routing is
# librdkafka's, the library librdkafka's column runs through confluent-kafka; half its runs
# there were skips, kcat having no admin commands). It still runs every scenario on the
# in-process broker.
CLUSTER_CLIENTS = ("java", "librdkafka", "kafka_python", "aiokafka", "kafkajs")


class Target:
    """The broker side of a scenario."""

    name = ""  # "broker" or "cluster": the parameter in test ids and the matrix section

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def node_ids(self) -> set[int]:
        """The ids of the brokers clients are routed to."""
        raise NotImplementedError

    def create_topic(self, topic: str, partitions: int) -> None:
        """Make a topic in the default stream, as an operator would before clients use it."""
        raise NotImplementedError

    def batch_headers(self, topic: str, partition: int = 0) -> list[BatchHeader]:
        """The v2 batch headers stored for a partition, from its first offset."""
        raise NotImplementedError

    def is_deleted(self, topic: str) -> bool:
        """Whether the topic is gone from the broker side (every broker, on the cluster)."""
        raise NotImplementedError

    def leaders(self, topic: str) -> dict[int, int]:
        """partition -> leader's node id, as Metadata reports them once every partition has one."""
        return _leaders(self.bootstrap, topic)


class InProcessTarget(Target):
    name = "broker"

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def node_ids(self) -> set[int]:
        return {self.broker.config.node_id}

    def create_topic(self, topic: str, partitions: int) -> None:
        store = self.broker.server.store
        self.broker.call(store.create_topic(store.default_stream, topic, partitions))

    def batch_headers(self, topic: str, partition: int = 0) -> list[BatchHeader]:
        return stored_batch_headers(self.broker, topic, partition=partition)

    def is_deleted(self, topic: str) -> bool:
        store = self.broker.server.store
        return store.get_topic(store.default_stream, topic) is None


def stored_batch_headers(broker: Broker, topic: str, stream: str | None = None,
                         partition: int = 0) -> list[BatchHeader]:
    """The v2 batch headers an in-process broker stored for a partition, read from its store."""
    store = broker.server.store
    part = store.partition(stream or store.default_stream, topic, partition)
    data = bytes(broker.call(part.read(part.log_start_offset, FETCH_BYTES)))
    return [header for _, header in split_batches(data)]


class ClusterTarget(Target):
    """Clients bootstrap from one broker (the second), so reaching the others' partitions
    takes following Metadata, as a client of a real cluster does."""

    name = "cluster"

    def __init__(self, cluster: BrokerCluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.broker(2).bootstrap

    @property
    def node_ids(self) -> set[int]:
        return set(range(1, len(self.cluster.brokers) + 1))

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(SETTLE_S)
        for broker in self.cluster.brokers:  # so a client bootstrapping from any of them sees it led
            _leaders(broker.bootstrap, topic)

    def batch_headers(self, topic: str, partition: int = 0) -> list[BatchHeader]:
        leader = self.cluster.broker(self.leaders(topic)[partition])
        with Wire(leader.bootstrap) as wire:
            return fetched_batch_headers(wire, topic, partition)

    def is_deleted(self, topic: str) -> bool:
        """Every broker stops listing it within SETTLE_S (each learns of a deletion from the store)."""
        deadline = time.monotonic() + SETTLE_S
        for broker in self.cluster.brokers:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            while topic in admin.list_topics(timeout=10).topics:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)
        return True


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + SETTLE_S
    while True:
        # all topics, not just this one: asking for one by name could create it
        found = admin.list_topics(timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            leaders = {p.id: p.leader for p in found.partitions.values()}
            if min(leaders.values()) >= 0:
                return leaders
        if time.monotonic() > deadline:
            raise AssertionError(f"{bootstrap}: {topic} has no leader for every partition: {found}")
        time.sleep(0.1)


def fetched_batch_headers(wire: Wire, topic: str, partition: int) -> list[BatchHeader]:
    """Every batch header of a partition from offset 0 to its high watermark, by Fetch (v11) from its leader."""
    import kio.schema.fetch.v11.request as m

    headers: list[BatchHeader] = []
    offset = 0
    while True:
        request = make(
            m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=FETCH_BYTES,
            isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
            topics=(make(m.FetchTopic, topic=topic, partitions=(make(
                m.FetchPartition, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=FETCH_BYTES),)),),
        )
        answer = wire.request(1, 11, request).responses[0].partitions[0]
        assert answer.error_code == ErrorCode.none, f"Fetch {topic}-{partition} at {offset}: {answer.error_code!r}"
        if offset >= answer.high_watermark:
            return headers
        assert answer.records, f"Fetch {topic}-{partition} at {offset} returned nothing below {answer.high_watermark}"
        batch = [header for _, header in split_batches(answer.records)]
        headers += batch
        offset = batch[-1].base_offset + batch[-1].last_offset_delta + 1


class WorkerPorts:
    """The brokers of a `serve --workers N` process as a ClusterTarget reaches them: node ids 1..N."""

    def __init__(self, ports: list[int]) -> None:
        self.brokers = [_Address(f"127.0.0.1:{port}") for port in ports]

    def broker(self, node_id: int) -> "_Address":
        return self.brokers[node_id - 1]


class _Address:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


class WorkersTarget(ClusterTarget):
    """`serve --workers 2`: clients bootstrap from worker 1, so worker 0's partitions and every
    group's coordinator (worker 0) are reached by following Metadata and FindCoordinator."""

    name = "workers"

    def __init__(self, workers: WorkerPorts) -> None:
        self.cluster = workers  # type: ignore[assignment]
