"""REST v2 consumer instances and topics, as Confluent REST Proxy clients use them, beside Kafka clients."""

from __future__ import annotations

import base64
import time

import pytest
import requests
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(120)
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture(scope="module")
def broker():
    with Broker(http_port=0) as running:
        yield running


def post(url: str, body: dict | None = None, content_type: str = V2) -> requests.Response:
    return requests.post(url, json=body, headers={"Content-Type": content_type}, timeout=15)


def create(broker: Broker, group: str, name: str, fmt: str, **settings: str) -> str:
    answer = post(f"{broker.http_url}/consumers/{group}", {"name": name, "format": fmt, **settings})
    assert answer.status_code == 200, answer.text
    assert answer.json()["instance_id"] == name
    return answer.json()["base_uri"]


def poll_until(base: str, fmt: str, count: int, timeout: float = 20.0) -> list[dict]:
    """GET records until `count` have come (REST consumers, like Kafka's, may need a few polls to join)."""
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        answer = requests.get(base + "/records?timeout=1000", timeout=15,
                              headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"].startswith(f"application/vnd.kafka.{fmt}.v2+json")
        out.extend(answer.json())
    return out


def test_produce_v2_then_consume_json_with_a_subscription_and_commit(broker) -> None:
    broker.create_topic("v2-json", partitions=2)
    produced = post(f"{broker.http_url}/topics/v2-json", {"records": [
        {"key": "k", "value": {"n": 1}}, {"value": [1, 2]}, {"value": "s", "partition": 1}]},
        content_type="application/vnd.kafka.json.v2+json")
    assert produced.status_code == 200
    offsets = produced.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets) and offsets[2]["partition"] == 1

    base = create(broker, "json-group", "c1", "json", **{"auto.offset.reset": "earliest"})
    assert post(base + "/subscription", {"topics": ["v2-json"]}).status_code == 204
    assert requests.get(base + "/subscription", timeout=10).json() == {"topics": ["v2-json"]}
    records = poll_until(base, "json", 3)
    values = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in records)
    assert {(v[2], str(v[3])) for v in values} == {("k", "{'n': 1}"), (None, "[1, 2]"), (None, "s")}

    committed = post(base + "/offsets")
    assert committed.status_code == 200
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("json-group")])["json-group"].result(10)
    seen = {tp.partition: tp.offset for tp in result.topic_partitions}
    by_partition = {}
    for partition, offset, _, _ in values:
        by_partition[partition] = max(by_partition.get(partition, 0), offset + 1)
    assert seen == by_partition
    got = requests.get(base + "/offsets", json={"partitions": [{"topic": "v2-json", "partition": 0}]},
                       headers={"Content-Type": V2}, timeout=10).json()
    assert got["offsets"][0]["offset"] == by_partition[0]
    assert requests.delete(base, timeout=10).status_code == 204


def test_a_rest_consumer_shares_its_group_with_a_kafka_consumer(broker) -> None:
    """The REST instance is a real group member: a confluent-kafka consumer in the group gets the other half."""
    broker.create_topic("shared", partitions=2)
    base = create(broker, "mixed-group", "rest-member", "binary", **{"auto.offset.reset": "earliest"})
    assert post(base + "/subscription", {"topics": ["shared"]}).status_code == 204
    poll_until(base, "binary", 0)
    kafka = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "mixed-group",
                      "client.id": "kafka-member", "auto.offset.reset": "earliest",
                      "session.timeout.ms": 10000})
    try:
        kafka.subscribe(["shared"])
        deadline = time.monotonic() + 40
        mine: list[dict] = []
        while time.monotonic() < deadline:
            kafka.poll(0.2)
            requests.get(base + "/records?timeout=200", headers={"Accept": "application/vnd.kafka.binary.v2+json"},
                         timeout=10)
            mine = requests.get(base + "/assignments", timeout=10).json()["partitions"]
            if len(mine) == 1 and len(kafka.assignment()) == 1:
                break
        assert len(mine) == 1, mine
        assert {tp.partition for tp in kafka.assignment()} | {mine[0]["partition"]} == {0, 1}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        group = admin.describe_consumer_groups(["mixed-group"])["mixed-group"].result(10)
        assert sorted(m.client_id for m in group.members) == ["kafka-member", "rest-consumer-rest-member"]
    finally:
        kafka.close()
        requests.delete(base, timeout=10)


def test_assign_and_seek_to_beginning_end_and_offset_with_binary(broker) -> None:
    broker.create_topic("seeking", partitions=1)
    for i in range(5):
        broker.produce("seeking", bytes([i]) * 3, key=b"k%d" % i)
    base = create(broker, "seek-group", "s1", "binary")
    assert post(base + "/assignments", {"partitions": [{"topic": "seeking", "partition": 0}]}).status_code == 204
    assert requests.get(base + "/assignments", timeout=10).json() == {"partitions": [{"topic": "seeking",
                                                                                     "partition": 0}]}
    tp = [{"topic": "seeking", "partition": 0}]
    assert post(base + "/positions/beginning", {"partitions": tp}).status_code == 204
    records = poll_until(base, "binary", 5)
    assert [base64.b64decode(r["value"]) for r in records] == [bytes([i]) * 3 for i in range(5)]
    assert base64.b64decode(records[2]["key"]) == b"k2"

    seek = post(base + "/positions", {"offsets": [{"topic": "seeking", "partition": 0, "offset": 3}]})
    assert seek.status_code == 204
    assert [r["offset"] for r in poll_until(base, "binary", 2)] == [3, 4]

    assert post(base + "/positions/end", {"partitions": tp}).status_code == 204
    broker.produce("seeking", b"new")
    assert [base64.b64decode(r["value"]) for r in poll_until(base, "binary", 1)] == [b"new"]
    not_assigned = post(base + "/positions/beginning", {"partitions": [{"topic": "seeking", "partition": 7}]})
    assert (not_assigned.status_code, not_assigned.json()["error_code"]) == (409, 40903)
    requests.delete(base, timeout=10)


def test_format_mismatch_and_duplicate_instance_are_refused(broker) -> None:
    base = create(broker, "fmt-group", "f1", "json")
    mismatch = requests.get(base + "/records", headers={"Accept": "application/vnd.kafka.binary.v2+json"}, timeout=10)
    assert (mismatch.status_code, mismatch.json()["error_code"]) == (406, 40601)
    again = post(f"{broker.http_url}/consumers/fmt-group", {"name": "f1", "format": "json"})
    assert (again.status_code, again.json()["error_code"]) == (409, 40902)
    bad = post(f"{broker.http_url}/consumers/fmt-group", {"name": "f2", "format": "avro"})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42204)
    requests.delete(base, timeout=10)


def test_v2_topics_and_mapr_stream_paths(broker) -> None:
    broker.create_topic("/apps/iot:temperature", partitions=2)
    stream = requests.utils.quote("/apps/iot", safe="")
    names = requests.get(f"{broker.http_url}/streams/{stream}/topics", timeout=10).json()
    assert names == ["temperature"]
    topic = requests.get(f"{broker.http_url}/streams/{stream}/topics/temperature", timeout=10).json()
    assert topic["name"] == "temperature" and [p["partition"] for p in topic["partitions"]] == [0, 1]
    produced = post(f"{broker.http_url}/streams/{stream}/topics/temperature/partitions/1",
                    {"records": [{"value": base64.b64encode(b"21.5").decode()}]},
                    content_type="application/vnd.kafka.binary.v2+json").json()
    assert produced["offsets"] == [{"partition": 1, "offset": 0, "error_code": None, "error": None}]
    assert [m.value for m in broker.consume("/apps/iot:temperature", partition=1, count=1)] == [b"21.5"]
    listed = requests.get(broker.http_url + "/topics", timeout=10).json()
    assert "/apps/iot:temperature" in listed


def test_default_stream_for_bare_rest_names() -> None:
    """rest_default_stream: a bare name in a REST request is a topic of that stream (MapR's streams.default.stream)."""
    with Broker(http_port=0, rest_default_stream="/apps/rest") as broker:
        broker.create_topic("/apps/rest:events", partitions=1)
        produced = post(f"{broker.http_url}/topics/events", {"records": [{"value": {"a": 1}}]},
                        content_type="application/vnd.kafka.json.v2+json").json()
        assert produced["offsets"][0]["offset"] == 0
        assert [m.value for m in broker.consume("/apps/rest:events", count=1)] == [b'{"a":1}']


def test_kafka_consumer_reads_what_rest_consumer_committed(broker) -> None:
    """Offsets committed over REST are the group's: a Kafka consumer joining later starts after them."""
    broker.create_topic("handover", partitions=1)
    for i in range(4):
        broker.produce("handover", b"m%d" % i)
    base = create(broker, "handover-group", "h1", "binary", **{"auto.offset.reset": "earliest",
                                                                "auto.commit.enable": "false"})
    assert post(base + "/assignments", {"partitions": [{"topic": "handover", "partition": 0}]}).status_code == 204
    assert len(poll_until(base, "binary", 4)) == 4
    assert post(base + "/offsets", {"offsets": [{"topic": "handover", "partition": 0, "offset": 2}]}).status_code == 200
    requests.delete(base, timeout=10)
    kafka = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "handover-group",
                      "auto.offset.reset": "earliest"})
    try:
        kafka.assign([TopicPartition("handover", 0)])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            message = kafka.poll(0.5)
            if message is not None and message.error() is None:
                first = message
        assert first is not None and (first.offset(), first.value()) == (2, b"m2")
    finally:
        kafka.close()
