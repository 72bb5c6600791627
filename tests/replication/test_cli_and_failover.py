"""The replication commands as users type them, and consumers failing over between clusters."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from kafkacompat.testing import Broker

from .helpers import admin, batches, end_offset, replica, wait_for


@pytest.fixture
def pair(tmp_path):
    a = Broker(str(tmp_path / "sanjose"), cluster_name="sanjose", group_initial_rebalance_delay_ms=0).start()
    b = Broker(str(tmp_path / "newyork"), cluster_name="newyork", group_initial_rebalance_delay_ms=0).start()
    yield a, b
    b.stop()
    a.stop()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args], capture_output=True, text=True, timeout=60)


def test_autosetup_multimaster_and_list_json(pair):
    a, b = pair
    admin(a).call("stream.create", path="/apps/iot", policy={"default_partitions": 2, "ttl_seconds": 86400})
    for i in range(10):
        a.produce("/apps/iot:pumps", f"p{i}".encode(), partition=i % 2)
    done = cli("stream", "replica", "autosetup", "--path", "/apps/iot", "--replica", replica(b, "/dr/iot"),
               "--multimaster", "--bootstrap-server", a.bootstrap_servers)
    assert done.returncode == 0, done.stderr
    info = admin(b).call("stream.info", path="/dr/iot")
    assert (info["default_partitions"], info["ttl_seconds"]) == (2, 86400)
    wait_for(lambda: end_offset(b, "/dr/iot", "pumps", 0) == 5 and end_offset(b, "/dr/iot", "pumps", 1) == 5,
             what="existing data copied")
    b.produce("/dr/iot:valves", b"from new york")  # the other master's own topic comes back
    wait_for(lambda: end_offset(a, "/apps/iot", "valves") == 1, what="reverse direction")
    assert batches(a, "/apps/iot", "valves") == batches(b, "/dr/iot", "valves")

    def listed():
        out = cli("stream", "replica", "list", "--path", "/apps/iot", "--json", "--bootstrap-server",
                  a.bootstrap_servers)
        assert out.returncode == 0, out.stderr
        links = json.loads(out.stdout)
        return links if links and links[0]["state"] == "in-sync" else None

    [link] = wait_for(listed, what="in-sync in replica list")
    assert link["replica"] == replica(b, "/dr/iot") and link["lag_messages"] == 0 and link["lag_bytes"] == 0
    assert {"oldest_unreplicated_ms", "last_error", "reason"} <= set(link)
    ups = json.loads(cli("stream", "upstream", "list", "--path", "/dr/iot", "--json", "--bootstrap-server",
                         b.bootstrap_servers).stdout)
    assert ups == [{"stream": "/dr/iot", "upstream": f"127.0.0.1:{a.port}/apps/iot",
                    "cluster": str(a.server.store.store_id)}]
    text = cli("stream", "upstream", "list", "--path", "/dr/iot", "--bootstrap-server", b.bootstrap_servers).stdout
    assert [line.split() for line in text.splitlines()] == [
        ["STREAM", "UPSTREAM", "CLUSTER-UUID"],
        ["/dr/iot", f"127.0.0.1:{a.port}/apps/iot", str(a.server.store.store_id)]]
    text = cli("stream", "replica", "list", "--path", "/apps/iot", "--bootstrap-server", a.bootstrap_servers).stdout
    assert text.splitlines()[0].split()[:3] == ["REPLICA", "CLUSTER", "STATE"] and "in-sync" in text
    info = json.loads(cli("cluster", "info", "--json", "--bootstrap-server", b.bootstrap_servers).stdout)
    assert info["name"] == "newyork" and info["replica_links"] == 1


def test_cli_errors_are_one_line(pair):
    a, b = pair
    bad = cli("stream", "replica", "add", "--path", "/s", "--replica", "nohostport", "--bootstrap-server",
              a.bootstrap_servers)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "HOST:PORT" in bad.stderr
    missing = cli("stream", "replica", "add", "--path", "/nope", "--replica", replica(b, "/s"),
                  "--bootstrap-server", a.bootstrap_servers)
    assert missing.returncode == 1 and missing.stderr.strip() == "kafkacompat: error: stream /nope does not exist"
    admin(a).call("stream.create", path="/s")
    assert cli("stream", "replica", "add", "--path", "/s", "--replica", replica(b, "/s"), "--bootstrap-server",
               a.bootstrap_servers).returncode == 0
    again = cli("stream", "replica", "autosetup", "--path", "/s", "--replica", replica(a, "/s"),
                "--bootstrap-server", b.bootstrap_servers)
    assert again.returncode == 1 and "stream /s does not exist" in again.stderr


def test_cluster_identity_is_kept_and_matches_describe_cluster(tmp_path):
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    with Broker(str(tmp_path / "london")) as broker:
        info = admin(broker).call("cluster.info")
        assert info["name"] == "london"
        kafka_admin = KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers})
        described = kafka_admin.describe_cluster().result(10)
        assert described.cluster_id == info["cluster_id"]
    with Broker(str(tmp_path / "london"), cluster_name="london-1") as broker:
        again = admin(broker).call("cluster.info")
        assert (again["uuid"], again["cluster_id"], again["name"]) == (info["uuid"], info["cluster_id"], "london-1")
    with Broker(str(tmp_path / "london")) as broker:
        assert admin(broker).call("cluster.info")["name"] == "london-1"


def test_cursor_failover_with_confluent_kafka(pair):
    from confluent_kafka import Consumer, Producer

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s", policy={"default_partitions": 2})
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    producer = Producer({"bootstrap.servers": a.bootstrap_servers})
    for i in range(40):
        producer.produce("/s:orders", f"o{i}".encode(), partition=i % 2)
    producer.flush(10)
    conf = {"group.id": "billing", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer({**conf, "bootstrap.servers": a.bootstrap_servers})
    consumer.subscribe(["/s:orders"])
    seen = []
    while len(seen) < 25:
        msg = consumer.poll(5)
        assert msg is not None and msg.error() is None
        seen.append(msg.value())
        consumer.commit(msg, asynchronous=False)
    consumer.close()
    committed = {p: c for p, c in a.committed("billing", "/s:orders").items()}
    wait_for(lambda: b.committed("billing", "/s:orders") == committed, what="cursors replicated")
    # cluster A is gone: the group carries on at B from its committed cursor; a producer switches too
    a.stop()
    producer = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(40, 44):
        producer.produce("/s:orders", f"o{i}".encode(), partition=i % 2)
    producer.flush(10)
    consumer = Consumer({**conf, "bootstrap.servers": b.bootstrap_servers})
    consumer.subscribe(["/s:orders"])
    rest = []
    while len(seen) + len(rest) < 44:
        msg = consumer.poll(5)
        assert msg is not None and msg.error() is None, "a message is missing after failover"
        rest.append(msg.value())
    assert consumer.poll(0.5) is None
    consumer.close()
    assert sorted(seen + rest, key=lambda v: int(v[1:])) == [f"o{i}".encode() for i in range(44)]


def test_cursor_failover_with_aiokafka(pair):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    for i in range(20):
        a.produce("/s:events", f"e{i}".encode())

    async def consume(bootstrap: str, count: int, commit: bool) -> list[bytes]:
        consumer = AIOKafkaConsumer("/s:events", bootstrap_servers=bootstrap, group_id="audit",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            while len(got) < count:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 10)
                for records in batch.values():
                    for record in records:
                        if len(got) < count:
                            got.append(record.value)
                            if commit:
                                await consumer.commit({TopicPartition("/s:events", 0): record.offset + 1})
        finally:
            await consumer.stop()
        return got

    first = asyncio.run(consume(a.bootstrap_servers, 12, commit=True))
    wait_for(lambda: b.committed("audit", "/s:events") == {0: 12}, what="cursor replicated")
    a.stop()
    rest = asyncio.run(consume(b.bootstrap_servers, 8, commit=False))
    assert first + rest == [f"e{i}".encode() for i in range(20)]


def test_replica_knows_idempotent_producers_sequences(pair):
    """A retry sent to the replica of a batch that reached it by replication is answered as a duplicate."""
    from confluent_kafka import Producer
    from kafkacompat.storage import batch_format as bf

    from .helpers import batches

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    producer = Producer({"bootstrap.servers": a.bootstrap_servers, "enable.idempotence": True})
    for i in range(5):
        producer.produce("/s:pay", f"p{i}".encode())
        producer.flush(10)
    wait_for(lambda: end_offset(b, "/s", "pay") == 5, what="replicated")
    base, raw = batches(b, "/s", "pay")[-1]
    header = bf.BatchHeader(*bf.HEADER.unpack(raw[:12] + b"\0\0\0\0" + raw[12:bf.HEADER_SIZE - 4]))
    verdict = b.server.cluster.producers.check(header.producer_id, header.producer_epoch, ("/s", "pay", 0),
                                               header.base_sequence, header.record_count)
    assert header.producer_id >= 0 and verdict.duplicate_of == base == 4
