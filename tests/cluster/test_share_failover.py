"""Share groups (KIP-932) on a cluster: the share-partition follows its topic partition's leader.

Three brokers on one PostgreSQL + S3 store. The Java 4.1 KafkaShareConsumer
(compat_tests/java/ShareGroups.java `failover`) takes six records of a
one-partition topic and accepts the first three; the test then moves the
partition's leadership, and a new member of the group reads on; then the
leadership moves again, one more record is produced and another member
reads. As on Kafka, where the share-partition lives with the partition's
leader and its state in __share_group_state, a broker that takes the
partition over reads the share-partition from the store: the accepted
records are never delivered again, the ones held when the leader went come
back (their delivery counted), and a broker that led the partition before
does not serve what it remembered from then.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from compat_tests.drivers.java import program_41
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable
from tests.cluster.test_features_cluster import unregister
from tests.shares.test_share_sessions import _fetch as fetch
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RECORDS = 6
BROKERS = [1, 2, 3]


@pytest.fixture
def cluster() -> Iterator[BrokerCluster]:
    try:
        args = cloud_cluster_args()  # a fresh database and key prefix; AWS_* in os.environ
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(len(BROKERS), args) as running:
        yield running


def _leader(bootstrap: str, topic: str) -> int:
    try:
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    except KafkaException:
        return -1
    return metadata.topics[topic].partitions[0].leader


def _wait_leader(bootstrap: str, topic: str, want: Callable[[int], bool], timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not want(leader := _leader(bootstrap, topic)):
        assert time.monotonic() < deadline, f"the leader of {topic}-0 is still {leader}"
        time.sleep(0.1)
    return leader


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.describe_topics(TopicCollection([topic]))[topic].result(10).topic_id
    mask = (1 << 64) - 1
    return uuid.UUID(int=(found.get_most_significant_bits() & mask) << 64 | found.get_least_significant_bits() & mask)


def _followers_refuse(cluster: BrokerCluster, topic: str, leader: int) -> None:
    """ShareFetch on a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER naming the
    leader and its endpoint, as Kafka answers, so the client goes there at once."""
    topic_id = _topic_id(cluster.bootstrap, topic)
    for node_id, broker in enumerate(cluster.brokers, 1):
        if node_id == leader:
            continue
        with Wire(broker.bootstrap) as wire:
            answer = fetch(wire, topic_id, 0, member=f"probe-{node_id}")
        partition = answer.responses[0].partitions[0]
        assert (answer.error_code, partition.error_code) == (ErrorCode.none, ErrorCode.not_leader_or_follower)
        assert partition.current_leader.leader_id == leader and partition.records in (b"", None)
        assert [(e.node_id, e.port) for e in answer.node_endpoints] == [(leader, cluster.broker(leader).port)]


def _failover(cluster: BrokerCluster, name: str, move: Callable[[int], None],
              move_back: Callable[[int], None]) -> tuple[dict, dict, dict]:
    """Run ShareGroups.java `failover`: `move(leader)` after the first member's step, `move_back(leader)`
    after the second's. What each member saw."""
    argv = [*program_41("ShareGroups"), "failover", cluster.bootstrap, f"topic={name}", f"group={name}",
            f"records={RECORDS}"]
    lines: queue.Queue[str] = queue.Queue()
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True) as program:

        def read() -> None:
            for line in program.stdout:
                if line.startswith("{"):
                    lines.put(line)

        def step() -> dict:
            try:
                return json.loads(lines.get(timeout=150))
            except queue.Empty:
                errors.seek(0)
                raise AssertionError(f"ShareGroups failover stalled:\n{errors.read()[-4000:]}") from None

        def go() -> None:
            program.stdin.write("go\n")
            program.stdin.flush()

        threading.Thread(target=read, daemon=True).start()
        try:
            held = step()
            leader = _leader(cluster.bootstrap, name)
            _followers_refuse(cluster, name, leader)
            move(leader)
            go()
            moved = step()
            move_back(leader)
            go()
            returned = step()
        finally:
            if program.poll() is None:
                program.kill()
    return held, moved, returned


def _check(held: dict, moved: dict, returned: dict) -> None:
    assert held == {"held": [f"v{i}@{i}#1" for i in range(RECORDS)], "commit": ["ok"]}
    # the three accepted never again; the three held when the leader went come back, each once, counted again
    assert sorted(r.split("#")[0] for r in moved["after_move"]) == [f"v{i}@{i}" for i in range(RECORDS // 2, RECORDS)]
    assert all(int(r.split("#")[1]) >= 2 for r in moved["after_move"])
    # everything before was accepted: only the new record, delivered for the first time
    assert returned == {"after_return": [f"v{RECORDS}@{RECORDS}#1"]}


def test_kill_9_of_the_leader_keeps_acknowledged_records_done(cluster: BrokerCluster) -> None:
    name = f"share-kill-{uuid.uuid4().hex[:8]}"

    def kill(leader: int) -> None:
        cluster.broker(leader).kill()

    def restart(leader: int) -> None:  # it leads the partition again: from the store, not from before its death
        cluster.broker(leader).start()
        cluster.wait_formed()
        _wait_leader(cluster.bootstrap, name, lambda now: now == leader)

    held, moved, returned = _failover(cluster, name, kill, restart)
    print(f"\nkill -9 of the leader: {held} -> {moved} -> {returned}")
    _check(held, moved, returned)


def _moves_away(name: str) -> tuple[int, int]:
    """(the partition's leader, another broker whose retirement moves the partition off that leader)."""
    key = ("/default", name, 0)
    leader = preferred_leader(BROKERS, key)
    for other in BROKERS:
        if other != leader and preferred_leader([b for b in BROKERS if b != other], key) != leader:
            return leader, other
    raise LookupError(name)


def test_leadership_away_and_back_serves_the_state_written_meanwhile(cluster: BrokerCluster) -> None:
    """The leader stays up while the partition leads elsewhere (another broker stopped and its node id
    retired, `kafka-cluster unregister`: the partitions spread over the two left) and comes back to it
    (that broker started again): it serves the state the other leader wrote, not the one it had, in
    which three records were still held by the first member. (A clean stop alone moves only the
    stopped broker's partitions.)"""
    for _ in range(100):
        name = f"share-move-{uuid.uuid4().hex[:8]}"
        try:
            leader, other = _moves_away(name)
            break
        except LookupError:
            continue

    def stop_other(now: int) -> None:
        assert now == leader
        cluster.broker(other).stop()
        assert unregister(cluster.broker(leader).bootstrap, other) == (ErrorCode.none, None)
        _wait_leader(cluster.broker(leader).bootstrap, name, lambda moved: moved not in (-1, leader, other))

    def start_other(_: int) -> None:
        cluster.broker(other).start()
        cluster.wait_formed()
        _wait_leader(cluster.bootstrap, name, lambda back: back == leader)

    held, moved, returned = _failover(cluster, name, stop_other, start_other)
    print(f"\nleadership away and back: {held} -> {moved} -> {returned}")
    _check(held, moved, returned)
