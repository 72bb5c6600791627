"""Bad REST input answers Confluent's error code and writes nothing (checked with a Kafka client)."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(120)
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture(scope="module")
def broker():
    with Broker(http_port=0, auto_create_topics=False, rest_consumer_instance_timeout_ms=1500) as running:
        yield running


@pytest.fixture
def v3(broker):
    (cluster,) = requests.get(broker.http_url + "/v3/clusters", timeout=10).json()["data"]
    return f"{broker.http_url}/v3/clusters/{cluster['cluster_id']}"


def end_offsets(broker: Broker, topic: str, partitions: int) -> list[int]:
    """Each partition's log end offset, as a Kafka client sees it (watermarks from the broker)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def curl(*args: str) -> tuple[int, str]:
    """A request made with curl, as users make them: (HTTP status, body)."""
    done = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args], capture_output=True, text=True,
                          timeout=30, check=True)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_malformed_json_is_answered_400_and_writes_nothing(broker, v3) -> None:
    broker.create_topic("bad-json", partitions=1)
    status, body = curl("-X", "POST", "-H", "Content-Type: application/json", "--data", '{"value": {"type": ',
                        v3 + "/topics/bad-json/records")
    assert status == 400  # one record, not streamed: answered with its report's HTTP status
    assert json.loads(body)["error_code"] == 400
    status, body = curl("-X", "POST", "-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked",
                        "--data", '{"value": {"type": ', v3 + "/topics/bad-json/records")
    assert status == 200  # streamed, as Confluent's: the status went out before the records; the report says
    assert json.loads(body)["error_code"] == 400
    # valid records before the break are written, nothing after it
    status, body = curl("-X", "POST", "-H", "Content-Type: application/json", "--data",
                        '{"value": {"type": "STRING", "data": "kept"}} {"value": oops} '
                        '{"value": {"type": "STRING", "data": "never"}}', v3 + "/topics/bad-json/records")
    reports = [json.loads(line) for line in body.splitlines()]
    assert [r["error_code"] for r in reports] == [200, 400]
    assert end_offsets(broker, "bad-json", 1) == [1]
    admin_status, admin_body = curl("-X", "POST", "-H", "Content-Type: application/json", "--data", "{nope",
                                    v3 + "/topics")
    assert (admin_status, json.loads(admin_body)["error_code"]) == (400, 400)
    empty = requests.post(v3 + "/topics/bad-json/records", data=b"", headers={"Content-Type": "application/json"},
                          timeout=10)
    assert (empty.status_code, empty.json()["error_code"]) == (422, 42206)
    v2 = requests.post(broker.http_url + "/topics/bad-json", data=b'{"records": [', timeout=10,
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
    assert (v2.status_code, v2.json()["error_code"]) == (400, 400)
    assert end_offsets(broker, "bad-json", 1) == [1]


def test_unknown_topic_is_answered_404_codes_and_creates_nothing(broker, v3) -> None:
    report = requests.post(v3 + "/topics/no-such-topic/records", json={"value": {"type": "STRING", "data": "x"}},
                           timeout=10).json()
    assert report["error_code"] == 40403
    described = requests.get(v3 + "/topics/no-such-topic", timeout=10)
    assert (described.status_code, described.json()["error_code"]) == (404, 40403)
    v2 = requests.post(broker.http_url + "/topics/no-such-topic", json={"records": [{"value": 1}]}, timeout=10,
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json"})
    assert (v2.status_code, v2.json()["error_code"]) == (404, 40401)
    assert requests.get(broker.http_url + "/topics/no-such-topic", timeout=10).json()["error_code"] == 40401
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lister"})
    try:
        assert "no-such-topic" not in consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()


def test_a_single_record_request_is_answered_with_its_reports_http_status(broker, v3) -> None:
    broker.create_topic("statuses", partitions=1)
    cases = [("statuses", {"value": {"type": "STRING", "data": "x"}}, 200, 200),
             ("no-such-topic", {"value": {"type": "STRING", "data": "x"}}, 404, 40403),
             ("statuses", {"partition_id": 5, "value": {"type": "STRING", "data": "x"}}, 404, 40402),
             ("statuses", {"value": {"type": "BINARY", "data": "%%%"}}, 400, 400)]
    for topic, body, status, code in cases:
        answer = requests.post(v3 + f"/topics/{topic}/records", json=body, timeout=10)
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), (topic, body, answer.text)
    assert end_offsets(broker, "statuses", 1) == [1]


def test_record_over_max_message_bytes_is_refused_and_not_written(broker, v3) -> None:
    broker.create_topic("small", partitions=1, configs={"max.message.bytes": "1024"})
    report = requests.post(v3 + "/topics/small/records", timeout=10,
                           json={"value": {"type": "STRING", "data": "x" * 4096}}).json()
    assert report["error_code"] == 50002
    assert "larger than the max message size" in report["message"]
    v2 = requests.post(broker.http_url + "/topics/small", json={"records": [{"value": "y" * 4096}]}, timeout=10,
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json"}).json()
    assert v2["offsets"][0]["error_code"] == 50002 and v2["offsets"][0]["offset"] is None
    assert end_offsets(broker, "small", 1) == [0]


def test_bad_payloads_are_refused_one_by_one(broker, v3) -> None:
    broker.create_topic("payloads", partitions=2)
    cases = [
        ({"value": {"type": "BINARY", "data": "%%%"}}, 400),
        ({"value": {"type": "STRING", "data": 12}}, 400),
        ({"value": {"type": "AVRO", "data": {}}}, 40401),  # the subject payloads-value has no schema
        ({"partition_id": -1, "value": {"type": "STRING", "data": "x"}}, 40402),
        ({"partition_id": 2, "value": {"type": "STRING", "data": "x"}}, 40402),
        ({"timestamp": "yesterday", "value": {"type": "STRING", "data": "x"}}, 400),
        ({"headers": [{"name": "h", "value": "not base64!"}], "value": {"type": "STRING", "data": "x"}}, 400),
        ([1, 2], 400),
    ]
    for body, code in cases:
        report = requests.post(v3 + "/topics/payloads/records", json=body, timeout=10).json()
        assert report["error_code"] == code, (body, report)
    assert end_offsets(broker, "payloads", 2) == [0, 0]


def test_consumer_instance_used_after_expiry_is_not_found(broker) -> None:
    broker.create_topic("expiring", partitions=1)
    created = requests.post(broker.http_url + "/consumers/exp-group", json={"name": "idle", "format": "binary"},
                            headers={"Content-Type": V2}, timeout=10)
    base = created.json()["base_uri"]
    assert requests.post(base + "/subscription", json={"topics": ["expiring"]}, headers={"Content-Type": V2},
                         timeout=10).status_code == 204
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def members() -> list:
        return admin.describe_consumer_groups(["exp-group"])["exp-group"].result(10).members

    deadline = time.monotonic() + 30
    while not members() and time.monotonic() < deadline:  # joined in the background
        time.sleep(0.1)
    assert [m.client_id for m in members()] == ["rest-consumer-idle"]
    while members() and time.monotonic() < deadline:  # idle past 1.5 s: reaped, and it left the group
        time.sleep(0.1)
    assert not members()
    for method, path in (("GET", "/records"), ("POST", "/offsets"), ("GET", "/assignments"),
                         ("DELETE", "/subscription"), ("DELETE", "")):
        answer = requests.request(method, base + path, headers={"Content-Type": V2}, timeout=10)
        assert (answer.status_code, answer.json()["error_code"]) == (404, 40403), (method, path)


def test_json_consumer_on_a_record_that_is_not_json_answers_40801_and_skips_nothing(broker) -> None:
    broker.create_topic("not-json", partitions=1)
    broker.produce("not-json", b"plain text")
    broker.produce("not-json", b'{"ok": true}')
    base = requests.post(broker.http_url + "/consumers/json-readers", headers={"Content-Type": V2}, timeout=10,
                         json={"name": "j", "format": "json", "auto.offset.reset": "earliest"}).json()["base_uri"]
    assert requests.post(base + "/assignments", json={"partitions": [{"topic": "not-json", "partition": 0}]},
                         headers={"Content-Type": V2}, timeout=10).status_code == 204
    accept = {"Accept": "application/vnd.kafka.json.v2+json"}
    for _ in range(2):  # the position stays at the record that cannot be read
        answer = requests.get(base + "/records?timeout=2000", headers=accept, timeout=10)
        assert (answer.status_code, answer.json()["error_code"]) == (408, 40801)
    assert requests.post(base + "/positions", json={"offsets": [{"topic": "not-json", "partition": 0, "offset": 1}]},
                         headers={"Content-Type": V2}, timeout=10).status_code == 204
    records = requests.get(base + "/records?timeout=2000", headers=accept, timeout=10).json()
    assert [(r["offset"], r["value"]) for r in records] == [(1, {"ok": True})]
    requests.delete(base, timeout=10)


def test_broker_validation_applies_and_names_the_http_client(broker, v3, caplog) -> None:
    """A record the broker's own produce validation refuses (timestamp too old) is refused over REST too,
    and the broker's log names the HTTP client it came from."""
    broker.create_topic("recent-only", partitions=1, configs={"message.timestamp.before.max.ms": "60000"})
    with caplog.at_level("WARNING", logger="kafkacompat.handlers.produce"):
        report = requests.post(v3 + "/topics/recent-only/records", timeout=10, json={
            "timestamp": "2001-01-01T00:00:00Z", "value": {"type": "STRING", "data": "old"}}).json()
    assert report["error_code"] == 50002 and "timestamp" in report["message"]
    assert any("via REST" in record.getMessage() for record in caplog.records)
    assert end_offsets(broker, "recent-only", 1) == [0]


def test_client_gone_mid_stream_keeps_what_arrived_whole_and_nothing_else(broker, v3, caplog) -> None:
    broker.create_topic("cut-off", partitions=1)
    path = v3.split(str(broker.http_port), 1)[1] + "/topics/cut-off/records"
    with caplog.at_level("WARNING"):
        with socket.create_connection(("127.0.0.1", broker.http_port), timeout=10) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n".encode())
            for part in (b'{"value": {"type": "STRING", "data": "whole"}}', b'{"value": {"type": "STRI'):
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            assert b"200 OK" in sock.recv(4096)  # the first report came back: the whole record is written
        assert [m.value for m in broker.consume("cut-off", count=1)] == [b"whole"]
        assert requests.get(broker.http_url + "/health/live", timeout=10).status_code == 200
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert end_offsets(broker, "cut-off", 1) == [1]


@pytest.mark.parametrize("document", [
    pytest.param("[" * 50_000 + "]" * 50_000, id="nested-50000"),
    pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, id="nested-100000"),
    pytest.param("1" * 100_001, id="digits-100001"),
])
def test_json_past_the_depth_and_number_limits_is_one_400_and_writes_nothing(broker, v3, document, request) -> None:
    topic = "bounded-json-" + request.node.callspec.id
    broker.create_topic(topic, partitions=1)
    json_type = {"Content-Type": "application/json"}
    v3_record = '{"value": {"type": "JSON", "data": %s}}' % document
    produced = requests.post(f"{v3}/topics/{topic}/records", data=v3_record, headers=json_type, timeout=30)
    assert produced.status_code == 400 and produced.json()["error_code"] == 400, produced.text[:300]
    v2 = {"Content-Type": "application/vnd.kafka.json.v2+json"}
    for url, body, headers in ((v3 + "/topics", document, json_type),
                               (f"{broker.http_url}/topics/{topic}", '{"records": [{"value": %s}]}' % document,
                                v2)):
        answer = requests.post(url, data=body, headers=headers, timeout=30)
        assert answer.status_code == 400, answer.text[:300]
        assert answer.json()["error_code"] == 400 and "JSON" in answer.json()["message"]
    assert end_offsets(broker, topic, 1) == [0]
