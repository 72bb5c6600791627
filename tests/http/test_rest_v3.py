"""REST v3 as Confluent REST Proxy clients use it: admin and produce over HTTP, checked with Kafka clients."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import aiohttp
import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker():
    with Broker(http_port=0) as running:
        yield running


@pytest.fixture
def v3(broker):
    """The v3 base URL of this broker's only cluster, found as a client finds it."""
    clusters = requests.get(broker.http_url + "/v3/clusters", timeout=10).json()
    assert clusters["kind"] == "KafkaClusterList"
    (cluster,) = clusters["data"]
    return f"{broker.http_url}/v3/clusters/{cluster['cluster_id']}"


def read_all(broker: Broker, topic: str, count: int, timeout: float = 15.0) -> list:
    """Records of a topic read by confluent-kafka from the beginning (no group offsets involved)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"reader-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message)
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def test_topic_lifecycle_seen_by_a_kafka_admin_client(broker, v3) -> None:
    created = requests.post(v3 + "/topics", json={
        "topic_name": "admin-t", "partitions_count": 3, "replication_factor": 1,
        "configs": [{"name": "retention.ms", "value": "3600000"}]}, timeout=10)
    assert created.status_code == 201, created.text
    assert created.json()["partitions_count"] == 3
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.list_topics(timeout=10).topics["admin-t"]
    assert len(described.partitions) == 3

    names = [t["topic_name"] for t in requests.get(v3 + "/topics", timeout=10).json()["data"]]
    assert "admin-t" in names
    parts = requests.get(v3 + "/topics/admin-t/partitions", timeout=10).json()["data"]
    assert [p["partition_id"] for p in parts] == [0, 1, 2]
    assert requests.get(v3 + "/topics/admin-t/partitions/2", timeout=10).json()["partition_id"] == 2

    config = requests.get(v3 + "/topics/admin-t/configs/retention.ms", timeout=10).json()
    assert (config["value"], config["source"], config["is_default"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG", False)
    assert requests.put(v3 + "/topics/admin-t/configs/retention.ms", json={"value": "7200000"},
                        timeout=10).status_code == 204
    assert requests.post(v3 + "/topics/admin-t/configs:alter", json={"data": [
        {"name": "cleanup.policy", "value": "compact"}, {"name": "retention.ms", "operation": "DELETE"}]},
        timeout=10).status_code == 204
    resource = ConfigResource("topic", "admin-t")
    seen = admin.describe_configs([resource])[resource].result(10)
    assert seen["cleanup.policy"].value == "compact"
    assert seen["retention.ms"].is_default
    listed = {c["name"]: c for c in requests.get(v3 + "/topics/admin-t/configs", timeout=10).json()["data"]}
    assert listed["cleanup.policy"]["value"] == "compact" and listed["retention.ms"]["is_default"]

    grown = requests.patch(v3 + "/topics/admin-t", json={"partitions_count": 5}, timeout=10)
    assert grown.status_code == 200 and grown.json()["partitions_count"] == 5
    assert requests.delete(v3 + "/topics/admin-t", timeout=10).status_code == 204
    gone = requests.get(v3 + "/topics/admin-t", timeout=10)
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)
    assert "admin-t" not in admin.list_topics(timeout=10).topics


def test_produce_json_binary_and_string_with_keys_headers_partition_and_timestamp(broker, v3) -> None:
    broker.create_topic("formats", partitions=3)
    bodies = [
        {"key": {"type": "STRING", "data": "k1"}, "value": {"type": "JSON", "data": {"n": 1, "s": "é"}}},
        {"partition_id": 2, "value": {"type": "BINARY", "data": base64.b64encode(b"\x00\xffraw").decode()},
         "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}, {"name": "empty", "value": None}]},
        {"partition_id": 1, "key": {"type": "BINARY", "data": base64.b64encode(b"bk").decode()},
         "value": {"type": "STRING", "data": "plain"}, "timestamp": "2026-01-02T03:04:05.678Z"},
    ]
    reports = []
    for body in bodies:
        answer = requests.post(v3 + "/topics/formats/records", json=body, timeout=10)
        assert answer.status_code == 200
        reports.append(answer.json())
    assert all(r["error_code"] == 200 and r["topic_name"] == "formats" for r in reports)
    assert reports[0]["key"] == {"type": "STRING", "size": 2}
    assert reports[0]["value"] == {"type": "JSON", "size": len('{"n":1,"s":"é"}'.encode())}
    assert (reports[1]["partition_id"], reports[2]["partition_id"]) == (2, 1)
    assert reports[2]["timestamp"] == "2026-01-02T03:04:05.678Z"

    got = {(m.partition(), m.offset()): m for m in read_all(broker, "formats", 3)}
    first = got[reports[0]["partition_id"], reports[0]["offset"]]
    assert (first.key(), json.loads(first.value())) == (b"k1", {"n": 1, "s": "é"})
    second = got[2, reports[1]["offset"]]
    assert second.value() == b"\x00\xffraw" and second.key() is None
    assert second.headers() == [("h", b"hv"), ("empty", None)]
    third = got[1, reports[2]["offset"]]
    assert (third.key(), third.value()) == (b"bk", b"plain")
    assert third.timestamp()[1] == 1767323045678


def test_keyed_records_land_where_a_kafka_producer_puts_them(broker, v3) -> None:
    """Kafka's default partitioner (murmur2) for keyed records, so REST and Kafka producers co-partition."""
    from confluent_kafka import Producer

    broker.create_topic("keyed", partitions=4)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"})
    expected = {}
    for key in ("a", "b", "c", "d", "e"):
        producer.produce("keyed", key=key.encode(), value=b"k",
                         on_delivery=lambda err, msg, key=key: expected.__setitem__(key, msg.partition()))
    producer.flush(10)
    for key, partition in expected.items():
        report = requests.post(v3 + "/topics/keyed/records", json={
            "key": {"type": "STRING", "data": key}, "value": {"type": "STRING", "data": "r"}}, timeout=10).json()
        assert report["partition_id"] == partition, key


async def test_streamed_produce_is_answered_record_by_record(broker, v3) -> None:
    """One request carrying a stream of records: each report arrives while the request is still open."""
    broker.create_topic("streamed", partitions=1)
    to_send: asyncio.Queue = asyncio.Queue()

    async def body():
        while (item := await asyncio.wait_for(to_send.get(), 20)) is not None:
            yield item

    answers = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        to_send.put_nowait(json.dumps({"value": {"type": "JSON", "data": {"i": 0}}}).encode())
        async with session.post(v3 + "/topics/streamed/records", data=body(),
                                headers={"Content-Type": "application/json"}) as response:
            answers.append(json.loads(await response.content.readline()))
            for i in (1, 2):  # each sent only after the previous one was answered
                to_send.put_nowait(json.dumps({"value": {"type": "JSON", "data": {"i": i}}}).encode())
                answers.append(json.loads(await response.content.readline()))
            to_send.put_nowait(b'{"value": {"type": "STRING", "data": "a"}}{"value": {"type": "STRING", "data": "b"}}')
            to_send.put_nowait(None)
            answers.extend(json.loads(line) for line in (await response.read()).splitlines() if line)
    assert [a["error_code"] for a in answers] == [200] * 5
    assert [a["offset"] for a in answers] == [0, 1, 2, 3, 4]
    got = await asyncio.to_thread(read_all, broker, "streamed", 5)
    assert [m.value() for m in got] == [b'{"i":0}', b'{"i":1}', b'{"i":2}', b"a", b"b"]


def test_batched_stream_keeps_each_records_own_verdict(broker, v3) -> None:
    """Records sent together are written together, yet a bad one is refused alone (Confluent answers per record)."""
    broker.create_topic("mixed", partitions=1, configs={"max.message.bytes": "2000"})
    records = [{"value": {"type": "STRING", "data": "ok-1"}},
               {"value": {"type": "BINARY", "data": "not base64!"}},
               {"value": {"type": "STRING", "data": "x" * 5000}},
               {"value": {"type": "STRING", "data": "ok-2"}}]
    answer = requests.post(v3 + "/topics/mixed/records", data="".join(json.dumps(r) for r in records), timeout=10,
                           headers={"Content-Type": "application/json"})
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200, 400, 50002, 200]
    assert [m.value() for m in read_all(broker, "mixed", 2)] == [b"ok-1", b"ok-2"]


def test_consumer_groups_with_consumers_and_lag(broker, v3) -> None:
    broker.create_topic("lagging", partitions=2)
    for i in range(10):
        broker.produce("lagging", f"v{i}".encode(), partition=i % 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-group",
                         "client.id": "lag-client", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["lagging"])
        got = 0
        deadline = time.monotonic() + 20
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            got += message is not None and message.error() is None
        consumer.commit(offsets=[TopicPartition("lagging", 0, 3), TopicPartition("lagging", 1, 5)], asynchronous=False)

        groups = requests.get(v3 + "/consumer-groups", timeout=10).json()["data"]
        group = next(g for g in groups if g["consumer_group_id"] == "lag-group")
        assert group["state"] == "STABLE" and group["is_simple"] is False
        consumers = requests.get(v3 + "/consumer-groups/lag-group/consumers", timeout=10).json()["data"]
        assert [c["client_id"] for c in consumers] == ["lag-client"]
        assignments = requests.get(consumers[0]["assignments"]["related"], timeout=10).json()["data"]
        assert sorted(a["partition_id"] for a in assignments) == [0, 1]
        lags = {lag["partition_id"]: lag for lag in
                requests.get(v3 + "/consumer-groups/lag-group/lags", timeout=10).json()["data"]}
        assert (lags[0]["current_offset"], lags[0]["log_end_offset"], lags[0]["lag"]) == (3, 5, 2)
        assert lags[1]["lag"] == 0 and lags[0]["client_id"] == "lag-client"
        summary = requests.get(v3 + "/consumer-groups/lag-group/lag-summary", timeout=10).json()
        assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"]) == (2, 2, 0)
    finally:
        consumer.close()


def test_topics_of_streams_by_stream_colon_topic_names(broker, v3) -> None:
    name = broker.create_topic("/apps/iot:pressure", partitions=1)
    encoded = requests.utils.quote(name, safe="")
    topic = requests.get(f"{v3}/topics/{encoded}", timeout=10).json()
    assert topic["topic_name"] == "/apps/iot:pressure"
    report = requests.post(f"{v3}/topics/{encoded}/records", json={"value": {"type": "STRING", "data": "42"}},
                           timeout=10).json()
    assert report["error_code"] == 200
    assert [m.value for m in broker.consume("/apps/iot:pressure", count=1)] == [b"42"]


def test_another_cluster_id_is_not_found(broker) -> None:
    answer = requests.get(broker.http_url + "/v3/clusters/not-this-one/topics", timeout=10)
    assert (answer.status_code, answer.json()["error_code"]) == (404, 404)


def test_kip848_consumer_groups_are_listed_with_their_members(broker, v3) -> None:
    """Groups of the new consumer protocol (group.protocol=consumer) are described by ConsumerGroupDescribe."""
    broker.create_topic("new-protocol", partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kip848-group",
                         "group.protocol": "consumer", "client.id": "kip848-client"})
    try:
        consumer.subscribe(["new-protocol"])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        group = requests.get(v3 + "/consumer-groups/kip848-group", timeout=10).json()
        assert (group["type"], group["state"]) == ("CONSUMER", "STABLE")
        (member,) = requests.get(v3 + "/consumer-groups/kip848-group/consumers", timeout=10).json()["data"]
        assert member["client_id"] == "kip848-client"
        assigned = requests.get(member["assignments"]["related"], timeout=10).json()["data"]
        assert sorted((a["topic_name"], a["partition_id"]) for a in assigned) == [("new-protocol", 0),
                                                                                   ("new-protocol", 1)]
        listed = [g["consumer_group_id"] for g in requests.get(v3 + "/consumer-groups", timeout=10).json()["data"]]
        assert "kip848-group" in listed
    finally:
        consumer.close()


def test_rest_writes_are_an_idempotent_producers(broker, v3) -> None:
    """As Confluent's (idempotent) producer: one producer id, sequences continuing across requests,
    seen with DescribeProducers (what kafka-producers.sh asks) on the Kafka port."""
    from kafkacompat.http.kafka_calls import build
    from tests.wire import Wire

    broker.create_topic("idempotent", partitions=1)
    stream = "".join(json.dumps({"value": {"type": "STRING", "data": f"r{i}"}}) for i in range(3))
    for body in (stream, json.dumps({"value": {"type": "STRING", "data": "r3"}})):
        reports = [json.loads(line) for line in requests.post(
            v3 + "/topics/idempotent/records", data=body, headers={"Content-Type": "application/json"},
            timeout=10).text.splitlines()]
        assert {r["error_code"] for r in reports} == {200}
    request = build(61, topics=(build(61, "TopicRequest", name="idempotent", partition_indexes=(0,)),))
    with Wire(broker.bootstrap_servers) as wire:
        answer = wire.request(61, 0, request)
    (producer,) = answer.topics[0].partitions[0].active_producers
    assert producer.producer_id >= 0 and producer.last_sequence == 3


def test_rest_producer_starts_over_when_the_broker_forgets_it(broker, v3) -> None:
    """Producer state expired (here: dropped) on the broker: the next REST write takes a new producer id."""
    broker.create_topic("forgotten", partitions=1)
    post = lambda data: requests.post(v3 + "/topics/forgotten/records", timeout=10,  # noqa: E731
                                      json={"value": {"type": "STRING", "data": data}}).json()
    assert post("before")["error_code"] == 200
    broker.call(broker.server.cluster.reset_producers())
    after = post("after")
    assert (after["error_code"], after["offset"]) == (200, 1)
    assert [m.value for m in broker.consume("forgotten")] == [b"before", b"after"]
