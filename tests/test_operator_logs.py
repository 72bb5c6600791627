"""What an operator reads: every admin change logged once (who, from where, how it ended), a request log
at DEBUG that costs nothing when off, connections opened and closed at DEBUG, and JSON lines on request."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafkacompat.admin.client import AdminClient as CliAdmin
from kafkacompat.security.client import ClientSecurity
from kafkacompat.testing import Broker
from kafkacompat.testing.ports import free_port
from tests.test_cli_serve import start, wait_for_line

ADMIN_LOG = "kafkacompat.admin"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def broker():
    with Broker(sasl={"alice": "secret"}, authorizer=True, super_users=["User:alice"]) as running:
        yield running


def _admin_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ADMIN_LOG and r.levelno == logging.INFO]


def test_kafka_api_admin_changes_are_logged_once_with_principal_entry_point_and_result(broker, caplog):
    caplog.set_level(logging.INFO, logger=ADMIN_LOG)
    admin = AdminClient({**broker.client_config("alice", "secret"), "client.id": "ops-console"})
    admin.create_topics([NewTopic("audited", 2, 1)])["audited"].result(15)
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic("audited", 1, 1)])["audited"].result(15)
    admin.create_partitions([NewPartitions("audited", 3)])["audited"].result(15)
    resource = ConfigResource("topic", "audited",
                              incremental_configs=[ConfigEntry("retention.ms", "60000",
                                                               incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    acl = AclBinding(ResourceType.TOPIC, "audited", ResourcePatternType.LITERAL, "User:bob", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(15)
    flt = AclBindingFilter(ResourceType.TOPIC, "audited", ResourcePatternType.LITERAL, "User:bob", None,
                           AclOperation.ANY, AclPermissionType.ANY)
    admin.delete_acls([flt])[flt].result(15)
    admin.delete_topics(["audited"])["audited"].result(15)
    lines = _admin_lines(caplog)
    assert len(lines) == 7, lines  # once each: no second line from the handler, none for the reads between
    for line in lines:
        assert "by User:alice from 127.0.0.1:" in line and "via SASL_PLAINTEXT (client ops-console)" in line
    created, refused, grown, configured, acl_added, acl_removed, deleted = lines
    assert created.startswith("CreateTopics v") and "create topics audited (2 partitions)" in created
    assert created.endswith(": ok")
    assert "failed: audited: TOPIC_ALREADY_EXISTS" in refused
    assert "create partitions audited to 3: ok" in grown
    assert "alter configs topic 'audited': SET retention.ms='60000'" in configured
    assert configured.endswith(": ok")
    assert "create ACLs ALLOW User:bob READ from host * on TOPIC 'audited'" in acl_added
    assert acl_removed.startswith("DeleteAcls v") and acl_removed.endswith(": ok")
    assert "delete topics audited: ok" in deleted


def test_command_line_admin_is_logged_the_same_way_and_reads_are_not(broker, caplog):
    caplog.set_level(logging.INFO, logger=ADMIN_LOG)
    login = {k: v for k, v in broker.client_config("alice", "secret").items() if k != "bootstrap.servers"}
    cli = CliAdmin(broker.bootstrap_servers, timeout=30, security=ClientSecurity(login))
    cli.call("stream.create", path="/ops")
    cli.call("stream.list")
    cli.call("topic.create", name="/ops:t", partitions=1)
    [stream, topic] = _admin_lines(caplog)
    assert stream.startswith("StreamAdmin v0 by User:alice from 127.0.0.1:") and "stream.create path='/ops'" in stream
    assert stream.endswith(": ok") and topic.endswith(": ok")


def test_rest_admin_changes_are_logged_as_the_kafka_ports_are(caplog):
    caplog.set_level(logging.INFO, logger=ADMIN_LOG)
    with Broker(http_port=0) as running:
        [cluster] = requests.get(running.http_url + "/v3/clusters", timeout=10).json()["data"]
        topics = f"{running.http_url}/v3/clusters/{cluster['cluster_id']}/topics"
        made = requests.post(topics, json={"topic_name": "rest-made", "partitions_count": 2}, timeout=10)
        assert made.status_code == 201, made.text
        assert requests.delete(topics + "/rest-made", timeout=10).status_code == 204
    created, deleted = _admin_lines(caplog)
    assert created.startswith("CreateTopics v") and "by User:ANONYMOUS from 127.0.0.1" in created
    assert "via HTTP" in created and "create topics rest-made (2 partitions): ok" in created
    assert deleted.startswith("DeleteTopics v") and "delete topics rest-made: ok" in deleted


def test_request_log_is_debug_on_its_own_logger_and_silent_otherwise(broker, caplog):
    producer = Producer({**broker.client_config("alice", "secret"), "client.id": "rl-producer"})
    caplog.set_level(logging.INFO, logger="kafkacompat.request")
    producer.produce("req-log", b"x")
    assert producer.flush(15) == 0
    assert not [r for r in caplog.records if r.name == "kafkacompat.request"]
    caplog.set_level(logging.DEBUG, logger="kafkacompat.request")
    for i in range(5):
        producer.produce("req-log", b"y%d" % i)
        producer.flush(15)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkacompat.request"]
    produce = [line for line in lines if line.startswith("Produce v")]
    assert produce, lines
    assert "client rl-producer principal User:alice:" in produce[0]
    assert produce[0].endswith(" ms") and " bytes, " in produce[0]


def test_serve_json_lines_at_debug_name_admin_changes_connections_and_requests(tmp_path):
    port = free_port()
    proc = start(["--data-dir", "memory://", "--host", "127.0.0.1", "--port", str(port),
                  "--log-level", "DEBUG", "--log-format", "json"])
    try:
        wait_for_line(proc, "listening on")
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("jsonlog", 1, 1)])["jsonlog"].result(15)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        for i in range(100):
            producer.produce("jsonlog", b"m%d" % i)
        assert producer.flush(15) == 0
        admin.delete_topics(["jsonlog"])["jsonlog"].result(15)
        del producer, admin
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        records = [json.loads(line) for line in proc.stdout.read().splitlines() if line.strip()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    admin_lines = [r["message"] for r in records if r["logger"] == ADMIN_LOG]
    assert [m.split(":")[-1] for m in admin_lines] == [" ok", " ok"]
    assert "create topics jsonlog" in admin_lines[0] and "delete topics jsonlog" in admin_lines[1]
    assert any(r["logger"] == "kafkacompat.request" and r["message"].startswith("Produce v") for r in records)
    assert any("opened on PLAINTEXT" in r["message"] for r in records)
    assert any(r["message"].endswith("closed") for r in records)


def test_request_log_benchmark_reports_both_modes():
    done = subprocess.run([sys.executable, "-m", "kafkacompat.bench.request_log", "--messages", "300", "--rounds", "1"],
                          capture_output=True, text=True, timeout=240, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    rates = re.findall(r"request log (off|DEBUG)\s+median\s+(\d+) requests/s", done.stdout)
    assert [mode for mode, _ in rates] == ["off", "DEBUG"] and all(int(rate) > 0 for _, rate in rates)
    assert re.search(r"off costs one level check per request: \d+ ns", done.stdout)


def test_offsets_reset_by_an_admin_is_logged_and_a_standalone_consumers_commit_is_not(broker, caplog):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    login = broker.client_config("alice", "secret")
    producer = Producer(login)
    for i in range(3):
        producer.produce("resettable", b"m%d" % i)
    assert producer.flush(15) == 0
    member = Consumer({**login, "group.id": "joined", "auto.offset.reset": "earliest"})
    member.subscribe(["resettable"])
    got = 0
    while got < 3:
        got += sum(1 for m in member.consume(10, 1.0) if m.error() is None)
    member.commit(asynchronous=False)
    member.close()
    caplog.set_level(logging.INFO, logger=ADMIN_LOG)
    standalone = Consumer({**login, "group.id": "standalone", "enable.auto.commit": False})
    standalone.commit(offsets=[TopicPartition("resettable", 0, 2)], asynchronous=False)
    standalone.close()
    admin = AdminClient(login)
    request = ConsumerGroupTopicPartitions("joined", [TopicPartition("resettable", 0, 1)])
    admin.alter_consumer_group_offsets([request])["joined"].result(15)
    [line] = _admin_lines(caplog)
    assert line.startswith("OffsetCommit v") and "by User:alice" in line
    assert line.endswith("reset committed offsets of group joined: resettable[0] to 1: ok")
