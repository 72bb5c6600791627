"""`serve --workers 2` with an authorizer: the workers ask each other as the broker itself.

Workers serve PLAINTEXT only, so every Kafka client of theirs is User:ANONYMOUS, and before stop 57 so
was a worker asking another over its Kafka port: a transaction over both workers' partitions (worker 1
verifies with worker 0, worker 0 writes worker 1's markers) needed CLUSTER_ACTION for ANONYMOUS, which
lets any client write transaction markers; a REST write to worker 1's partition was judged at worker 1
as ANONYMOUS, not as the HTTP user worker 0 had let through. They now ask on each other's Unix socket
in the data dir (kafkacompat/workers/channel.py), as the broker's own principal.

The ACLs and SCRAM users are made first by a single broker on the same data dir whose super user is
ANONYMOUS (with workers, nobody else could make them), then the workers start with none.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import stat
import time
from pathlib import Path

import kio.schema.alter_client_quotas.v1.request as quotas_v1
import kio.schema.alter_user_scram_credentials.v0.request as scram_v0
import kio.schema.create_acls.v3.request as acls_v3
import kio.schema.describe_configs.v4.request as describe_configs_v4
import kio.schema.incremental_alter_configs.v1.request as alter_v1
import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafkacompat.protocol.admin_api import WORKER_STATE_KEY, decode_response, encode_request
from kafkacompat.protocol.messages import make
from kafkacompat.storage.disk.shared import owner_of
from kio.schema.errors import ErrorCode

from kafkacompat.frames import read_frame
from kafkacompat.testing.ports import free_port
from tests.test_cli_serve import start, wait_for_line
from tests.wire import Wire
from tests.workers.test_workers import Workers, asked, cli

pytestmark = pytest.mark.slow

SPANNED = "spanned"  # its two partitions are worker 0's and worker 1's
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def rest_topic() -> str:
    """A topic whose only partition is worker 1's: worker 0, which serves HTTP, hands its writes on."""
    for n in range(1000):
        if owner_of(2, "/default", f"rest-{n}", 0) == 1:
            return f"rest-{n}"
    raise AssertionError("no name")


def acl(kind: ResourceType, name: str, principal: str, operation: AclOperation,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", operation, permission)


def prepare(data: Path, topic: str) -> None:
    """Topics, SCRAM users and ACLs, made by a single broker whose super user is ANONYMOUS: ANONYMOUS may
    do everything to SPANNED, transactional ids and groups, but not CLUSTER_ACTION (denied) nor write
    `topic`; alice may write `topic`, bob may only see it."""
    port = free_port()
    proc = start(["--data-dir", str(data), "--host", "127.0.0.1", "--port", str(port), "--authorizer",
                  "--super-user", "User:ANONYMOUS"])
    try:
        wait_for_line(proc, "listening on")
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        for future in admin.create_topics([NewTopic(SPANNED, 2, 1), NewTopic(topic, 1, 1)]).values():
            future.result(30)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for future in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, info, password.encode()) for user, password in USERS.items()]
        ).values():
            future.result(30)
        anonymous = "User:ANONYMOUS"
        bindings = [acl(ResourceType.TOPIC, SPANNED, anonymous, AclOperation.ALL),
                    acl(ResourceType.TRANSACTIONAL_ID, "*", anonymous, AclOperation.ALL),
                    acl(ResourceType.GROUP, "*", anonymous, AclOperation.ALL),
                    acl(ResourceType.BROKER, "kafka-cluster", anonymous, AclOperation.DESCRIBE),
                    acl(ResourceType.BROKER, "kafka-cluster", anonymous, AclOperation.CLUSTER_ACTION,
                        AclPermissionType.DENY),
                    acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE),
                    acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE),
                    acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.DESCRIBE)]
        for future in admin.create_acls(bindings).values():
            future.result(30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


@pytest.fixture
def secured(tmp_path: Path):
    data, topic = tmp_path / "data", rest_topic()
    prepare(data, topic)
    http = free_port()
    running = Workers(data, 2, "--authorizer", "--http-port", str(http), "--http-host", "127.0.0.1")
    try:
        deadline = time.monotonic() + 30
        while not _ready(f"http://127.0.0.1:{http}"):
            assert time.monotonic() < deadline, "the HTTP server never said ready"
            time.sleep(0.1)
        yield running, data, topic, f"http://127.0.0.1:{http}"
    finally:
        running.kill()


def _ready(http: str) -> bool:
    try:
        return requests.get(f"{http}/health/ready", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


def test_a_transaction_over_both_workers_commits_without_cluster_action_for_clients(secured) -> None:
    workers, _data, _topic, _http = secured
    assert {owner_of(2, "/default", SPANNED, p) for p in (0, 1)} == {0, 1}
    producer = Producer({"bootstrap.servers": workers.bootstrap, "transactional.id": "spanning"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(SPANNED, f"kept-{p}".encode(), partition=p)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(SPANNED, f"dropped-{p}".encode(), partition=p)
    producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": "reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(SPANNED, p, 0) for p in (0, 1)])
    got, deadline = set(), time.monotonic() + 30
    try:
        while got != {b"kept-0", b"kept-1"} and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
    finally:
        consumer.close()
    assert got == {b"kept-0", b"kept-1"}  # both partitions' markers written, the aborted records never read


def test_rest_writes_to_worker_1_are_judged_as_the_http_user(secured) -> None:
    _workers, _data, topic, http = secured
    url = f"{http}/v3/clusters"

    def produce(user: str) -> requests.Response:
        token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
        cluster = requests.get(url, headers=headers, timeout=10).json()["data"][0]["cluster_id"]
        return requests.post(f"{url}/{cluster}/topics/{topic}/records", headers=headers, timeout=30,
                             json={"value": {"type": "STRING", "data": f"from {user}"}})

    allowed = produce("alice")
    assert allowed.status_code == 200 and allowed.json()["error_code"] == 200, allowed.text
    refused = produce("bob")  # refused at worker 0, before anything is handed on
    assert refused.status_code == 403, refused.text


def test_the_workers_sockets_are_the_store_owners_alone(secured) -> None:
    _workers, data, _topic, _http = secured
    folder = data / ".workers"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert sorted(os.listdir(folder)) == ["0", "1"]
    assert all(stat.S_ISSOCK(os.stat(folder / name).st_mode) for name in ("0", "1"))


def test_a_client_on_the_kafka_port_may_not_ask_what_the_workers_ask_each_other(secured) -> None:
    """The WorkerState request a worker sends on another's Unix socket, sent by a client to worker 1's Kafka
    port, is refused: that client is ANONYMOUS, which may not CLUSTER_ACTION."""
    workers, _data, _topic, _http = secured
    frame = encode_request(7, {"op": "metrics.read"}, key=WORKER_STATE_KEY)
    with socket.create_connection(("127.0.0.1", workers.ports[1]), timeout=30) as sock:
        sock.sendall(frame)
        _correlation, reply = decode_response(read_frame(sock, 1 << 20))
    assert reply.error_code == ErrorCode.cluster_authorization_failed.value, reply
    assert "User:ANONYMOUS may not ask worker state" in (reply.error or "")


def test_topic_configs_sent_to_worker_1_are_changed_as_the_client_may(secured) -> None:
    """Java's admin client sends a topic config change to any broker. With an authorizer, worker 1 refused
    every one (worker 0 would have judged the worker, not the client); it now checks the client's
    ALTER_CONFIGS itself and forwards only what the client may change."""
    workers, _data, topic, _http = secured

    def change(name: str) -> int:
        alter = make(alter_v1.AlterConfigsResource, resource_type=2, resource_name=name, configs=(
            make(alter_v1.AlterableConfig, name="retention.ms", config_operation=0, value="123456"),))
        with Wire(f"127.0.0.1:{workers.ports[1]}") as wire:
            answer = wire.request(44, 1, make(alter_v1.IncrementalAlterConfigsRequest, resources=(alter,),
                                              validate_only=False))
        return answer.responses[0].error_code

    def retention(name: str) -> str:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        return admin.describe_configs([resource])[resource].result(30)["retention.ms"].value

    assert change(SPANNED) == ErrorCode.none and retention(SPANNED) == "123456"  # ANONYMOUS may: ALL on it
    assert change(topic) == ErrorCode.topic_authorization_failed  # ANONYMOUS may not touch it


def test_acl_user_quota_and_config_changes_sent_to_worker_1_are_judged_as_the_client(secured) -> None:
    """Worker 1 hands these changes to worker 0, which writes the store's shared state and judges the worker
    (the broker itself), so worker 1 judges the client first: ANONYMOUS may not ALTER the cluster, so its
    ACL, SCRAM, quota and broker-default changes are refused there; it may change group configs."""
    workers, _data, _topic, _http = secured
    one = workers.ports[1]
    acls = asked(one, 30, 3, make(acls_v3.CreateAclsRequest, creations=(make(
        acls_v3.AclCreation, resource_type=2, resource_name="*", resource_pattern_type=3,
        principal="User:ANONYMOUS", host="*", operation=2, permission_type=3),)))
    users = asked(one, 51, 0, make(scram_v0.AlterUserScramCredentialsRequest, upsertions=(), deletions=(make(
        scram_v0.ScramCredentialDeletion, name="bob", mechanism=1),)))
    quotas = asked(one, 49, 1, make(quotas_v1.AlterClientQuotasRequest, validate_only=False, entries=(make(
        quotas_v1.EntryData, entity=(make(quotas_v1.EntityData, entity_type="user", entity_name="bob"),),
        ops=(make(quotas_v1.OpData, key="producer_byte_rate", value=1.0, remove=False),)),)))
    configs = asked(one, 44, 1, make(alter_v1.IncrementalAlterConfigsRequest, validate_only=False, resources=(
        make(alter_v1.AlterConfigsResource, resource_type=4, resource_name="", configs=(
            make(alter_v1.AlterableConfig, name="max.connections", config_operation=0, value="1"),)),)))
    refused = ErrorCode.cluster_authorization_failed
    assert [r.error_code for r in acls.results] == [refused], acls
    assert [r.error_code for r in users.results] == [refused], users
    assert [e.error_code for e in quotas.entries] == [refused], quotas
    assert [r.error_code for r in configs.responses] == [refused], configs

    group = asked(one, 44, 1, make(alter_v1.IncrementalAlterConfigsRequest, validate_only=False, resources=(
        make(alter_v1.AlterConfigsResource, resource_type=32, resource_name="g", configs=(
            make(alter_v1.AlterableConfig, name="consumer.session.timeout.ms", config_operation=0,
                 value="50000"),)),)))
    assert [r.error_code for r in group.responses] == [ErrorCode.none], group

    with Wire(f"127.0.0.1:{workers.ports[0]}") as wire:
        described = wire.request(32, 4, make(describe_configs_v4.DescribeConfigsRequest, resources=(
            make(describe_configs_v4.DescribeConfigsResource, resource_type=4, resource_name="",
                 configuration_keys=("max.connections",)),)))
    assert [c.value for r in described.results for c in r.configs] != ["1"], described
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
    assert admin.describe_user_scram_credentials(["bob"])["bob"].result(30).user == "bob"  # not deleted


def test_stream_commands_sent_to_worker_1_are_judged_as_the_client(secured) -> None:
    """Worker 1 hands the admin CLI's stream, topic and cursor operations to worker 0, which judges the worker
    (the broker itself), so worker 1 judges the client first: ANONYMOUS may not CREATE on the cluster, so
    its `stream create` is refused there; it has ALL on SPANNED, so its `topic edit` of it is made."""
    workers, _data, _topic, _http = secured
    refused = cli(workers, "stream", "create", "/denied", worker=1)
    assert refused.returncode != 0 and "User:ANONYMOUS may not create streams" in refused.stderr, refused.stderr
    assert "does not exist" in cli(workers, "stream", "info", "/denied").stderr
    edited = cli(workers, "topic", "edit", SPANNED, "--config", "retention.ms=123456", worker=1)
    assert edited.returncode == 0, edited.stderr
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, SPANNED)
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "123456"
