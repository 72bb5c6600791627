"""Authorization as users meet it: Kafka ACLs and stream permissions decide, refusals carry Kafka's errors.

Users log in over SASL/SCRAM; `admin` is a super user. The denied-access
matrix runs each permission allowed once and denied once with two client
families (confluent-kafka and kafka-python); the denied user holds every
other grant the action needs, so the refusal is about that permission alone.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path

import kafka.errors
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer

from kafkacompat.security import acls
from kafkacompat.testing import Broker

from .clients import FAMILIES, ck_consume, ck_produce, kp_config

USERS = {name: f"{name}-secret" for name in ("admin", "alice", "bob", "carl", "dave")}
AUDIT = "kafkacompat.audit"
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
A = AclOperation

# permission -> (grants of the allowed user, grants of the denied user, the denied user's error, topic made first)
MATRIX = {
    "produce": ([(TOPIC, A.WRITE)], [(TOPIC, A.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", True),
    "consume": ([(TOPIC, A.READ), (GROUP, A.READ)], [(TOPIC, A.DESCRIBE), (GROUP, A.READ)],
                "TOPIC_AUTHORIZATION_FAILED", True),
    "create topic": ([(TOPIC, A.CREATE)], [], "TOPIC_AUTHORIZATION_FAILED", False),
    "delete topic": ([(TOPIC, A.DELETE)], [(TOPIC, A.DESCRIBE)], "TOPIC_AUTHORIZATION_FAILED", True),
    "alter configs": ([(TOPIC, A.ALTER_CONFIGS)], [(TOPIC, A.DESCRIBE_CONFIGS)], "TOPIC_AUTHORIZATION_FAILED", True),
    "describe group": ([(GROUP, A.DESCRIBE)], [], "GROUP_AUTHORIZATION_FAILED", False),
    "commit": ([(GROUP, A.READ), (TOPIC, A.READ)], [(TOPIC, A.READ), (GROUP, A.DESCRIBE)],
               "GROUP_AUTHORIZATION_FAILED", True),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    groups = tmp_path_factory.mktemp("security") / "user-groups"
    groups.write_text("carl: ops\ndave: ops\n")
    # The PLAINTEXT listener is for the admin CLI (no SASL yet): its ANONYMOUS principal is made a super user.
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"],
                authorizer=True, super_users=["User:admin", "User:ANONYMOUS"],
                user_groups_file=str(groups)) as running:
        # Everyone writes somewhere: an idempotent producer (kafka-python's default) is refused
        # CLUSTER_AUTHORIZATION_FAILED by InitProducerId otherwise, before any topic is asked about.
        for user in USERS:
            grant(running, f"User:{user}", [(TOPIC, A.WRITE)], f"{user}-own-", "",
                  pattern=ResourcePatternType.PREFIXED)
        yield running
        _ADMINS.pop(running.port, None)  # let go while the broker runs: a kept client retries it for ever


_ADMINS: dict[int, AdminClient] = {}


def admin(broker: Broker) -> AdminClient:
    """The super user's client, kept for the broker's life (a dropped client cancels its pending futures)."""
    if broker.port not in _ADMINS:
        _ADMINS[broker.port] = AdminClient(broker.client_config("admin"))
    return _ADMINS[broker.port]


def grant(broker: Broker, principal: str, grants: list[tuple[ResourceType, AclOperation]], topic: str, group: str,
          permission: AclPermissionType = AclPermissionType.ALLOW,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
    bindings = [AclBinding(kind, topic if kind == TOPIC else group, pattern, principal, "*", operation, permission)
                for kind, operation in grants]
    if bindings:
        for future in admin(broker).create_acls(bindings).values():
            future.result(15)


def make_topic(broker: Broker, topic: str, message: bool = False) -> None:
    admin(broker).create_topics([NewTopic(topic, 1)])[topic].result(15)
    if message:
        assert ck_produce(broker.client_config("admin"), topic, "") is None


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("permission", list(MATRIX))
def test_each_permission_allowed_once_and_denied_once(broker: Broker, family: str, permission: str) -> None:
    allowed_grants, denied_grants, error, topic_first = MATRIX[permission]
    action = FAMILIES[family][permission]
    outcomes = {}
    for user, grants in (("alice", allowed_grants), ("bob", denied_grants)):
        topic, group = fresh("authz"), fresh("group")
        if topic_first:
            make_topic(broker, topic, message=permission == "consume")
        grant(broker, f"User:{user}", grants, topic, group)
        outcomes[user] = action(broker.client_config(user), topic, group)
    assert outcomes == {"alice": None, "bob": error}


def test_metadata_lists_only_topics_the_principal_may_describe(broker: Broker) -> None:
    hidden, shown = fresh("hidden"), fresh("shown")
    make_topic(broker, hidden)
    make_topic(broker, shown)
    grant(broker, "User:bob", [(TOPIC, A.READ)], shown, "")
    bob = AdminClient(broker.client_config("bob")).list_topics(timeout=15).topics
    assert shown in bob and hidden not in bob
    everything = admin(broker).list_topics(timeout=15).topics
    assert {shown, hidden} <= set(everything)
    # named explicitly, a topic bob may not describe is refused without telling whether it exists
    bob_client = AdminClient(broker.client_config("bob"))
    named = bob_client.list_topics(hidden, timeout=15).topics[hidden]
    missing = bob_client.list_topics(fresh("nowhere"), timeout=15).topics
    assert named.error.name() == "TOPIC_AUTHORIZATION_FAILED"
    assert [t.error.name() for t in missing.values()] == ["TOPIC_AUTHORIZATION_FAILED"]


def test_a_deny_acl_wins_over_a_prefixed_allow(broker: Broker) -> None:
    prefix = fresh("deny") + "-"
    blocked, open_ = prefix + "blocked", prefix + "open"
    for topic in (blocked, open_):
        make_topic(broker, topic)
    grant(broker, "User:alice", [(TOPIC, A.WRITE)], prefix, "", pattern=ResourcePatternType.PREFIXED)
    grant(broker, "User:alice", [(TOPIC, A.WRITE)], blocked, "", permission=AclPermissionType.DENY)
    config = broker.client_config("alice")
    assert ck_produce(config, open_, "") is None
    assert ck_produce(config, blocked, "") == "TOPIC_AUTHORIZATION_FAILED"


def test_a_grant_counts_at_once_and_a_removal_too(broker: Broker) -> None:
    topic = fresh("grant")
    make_topic(broker, topic)
    config = broker.client_config("carl")
    assert ck_produce(config, topic, "") == "TOPIC_AUTHORIZATION_FAILED"
    grant(broker, "User:carl", [(TOPIC, A.WRITE)], topic, "")
    assert ck_produce(config, topic, "") is None
    found = admin(broker).delete_acls([AclBindingFilter(TOPIC, topic, ResourcePatternType.LITERAL, "User:carl",
                                                        None, A.ANY, AclPermissionType.ANY)])
    assert [len(future.result(15)) for future in found.values()] == [1]
    assert ck_produce(config, topic, "") == "TOPIC_AUTHORIZATION_FAILED"


def cli(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    plain = f"127.0.0.1:{broker.server.listener_port('PLAINTEXT')}"
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", plain],
                          capture_output=True, text=True, timeout=60)


def test_stream_permission_expressions_decide_for_the_streams_topics(broker: Broker) -> None:
    stream = f"/apps/{fresh('iot')}"
    made = cli(broker, "stream", "create", stream, "--produceperm", "u:alice | g:ops",
               "--consumeperm", "g:ops & !u:carl")
    assert made.returncode == 0, made.stderr
    assert cli(broker, "topic", "create", f"{stream}:temps").returncode == 0
    topic = f"{stream}:temps"
    # produce: alice by name, carl and dave as members of ops; bob is neither
    assert {user: ck_produce(broker.client_config(user), topic, "") for user in ("alice", "bob", "carl")} == {
        "alice": None, "bob": "TOPIC_AUTHORIZATION_FAILED", "carl": None}
    # consume: ops but not carl; the group is granted to Group:ops by a Kafka ACL (one model, two views)
    group = fresh("iot-dashboards")
    grant(broker, "Group:ops", [(GROUP, A.READ)], topic, group)
    assert ck_consume(broker.client_config("dave"), topic, group) is None
    assert ck_consume(broker.client_config("carl"), topic, group) == "TOPIC_AUTHORIZATION_FAILED"
    # MapR's spelling and the hyphenated one set the same permission; p is public
    assert cli(broker, "stream", "edit", stream, "--produce-perm", "p").returncode == 0
    assert ck_produce(broker.client_config("bob"), topic, "") is None
    shown = cli(broker, "stream", "info", stream, "--json")
    assert '"produce": "p"' in shown.stdout and '"consume": "g:ops & !u:carl"' in shown.stdout


def test_every_denial_is_one_audit_line_without_secrets(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    topic = fresh("audited")
    make_topic(broker, topic)
    grant(broker, "User:bob", [(TOPIC, A.DESCRIBE)], topic, "")  # so the refusal is of the write itself
    with caplog.at_level(logging.INFO, logger=AUDIT):
        assert ck_produce(broker.client_config("bob"), topic, "") == "TOPIC_AUTHORIZATION_FAILED"
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT and "denied" in r.getMessage()]
    assert any(line.startswith("authorization denied: principal=User:bob client=127.0.0.1:")
               and f"operation=WRITE resource=TOPIC:{topic} api=produce" in line for line in lines), lines
    assert not any(password in r.getMessage() for r in caplog.records for password in USERS.values())


def test_cluster_apis_need_cluster_operations(broker: Broker) -> None:
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, A.ANY,
                                  AclPermissionType.ANY)
    binding = AclBinding(TOPIC, "t", ResourcePatternType.LITERAL, "User:bob", "*", A.ALL, AclPermissionType.ALLOW)
    bob = AdminClient(broker.client_config("bob"))  # noqa: F841 - kept while its futures run
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        for future in bob.create_acls([binding]).values():
            future.result(15)
    assert admin(broker).describe_acls(everything).result(15)  # a super user sees them all


def test_aborting_a_transaction_needs_alter_or_cluster_action_on_the_cluster(broker: Broker) -> None:
    """Admin.abortTransaction (WriteTxnMarkers) is allowed as Kafka 4.1 allows it: ALTER on the cluster,
    else CLUSTER_ACTION; without either every partition is CLUSTER_AUTHORIZATION_FAILED."""
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec, KafkaAdminClient

    topic = fresh("abort-authz")
    make_topic(broker, topic)
    spec = AbortTransactionSpec(TopicPartition(topic, 0), producer_id=4242, producer_epoch=0, coordinator_epoch=0)
    for user in ("carl", "dave"):  # the admin finds the partition's leader in Metadata
        grant(broker, f"User:{user}", [(TOPIC, A.DESCRIBE)], topic, "")

    def abort(user: str) -> str | None:
        client = KafkaAdminClient(**kp_config(broker.client_config(user)))
        try:
            client.abort_transaction(spec)  # a producer with no state here: the marker is written
            return None
        except kafka.errors.BrokerResponseError as exc:
            return type(exc).message
        finally:
            client.close()

    refused = {user: abort(user) for user in ("carl", "dave")}
    for user, operation in (("carl", A.ALTER), ("dave", A.CLUSTER_ACTION)):
        for future in admin(broker).create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster",
                                                            ResourcePatternType.LITERAL, f"User:{user}", "*",
                                                            operation, AclPermissionType.ALLOW)]).values():
            future.result(15)
    assert refused == {"carl": "CLUSTER_AUTHORIZATION_FAILED", "dave": "CLUSTER_AUTHORIZATION_FAILED"}
    assert {user: abort(user) for user in ("carl", "dave")} == {"carl": None, "dave": None}


def test_an_idempotent_producer_needs_to_write_somewhere() -> None:
    """IDEMPOTENT_WRITE on the cluster or WRITE on some topic (a public stream would count: a broker of its own)."""
    with Broker(sasl={"admin": "admin-pw", "eve": "eve-pw"}, authorizer=True, super_users=["User:admin"]) as alone:
        client = AdminClient(alone.client_config("admin"))
        client.create_topics([NewTopic("eve-topic", 1)])["eve-topic"].result(15)
        for future in client.create_acls([AclBinding(TOPIC, "eve-topic", ResourcePatternType.LITERAL, "User:eve",
                                                     "*", A.DESCRIBE, AclPermissionType.ALLOW)]).values():
            future.result(15)  # she may see it, but write nowhere
        # (kafka-python's producer is idempotent by default, and says what InitProducerId answered)
        eve = KafkaProducer(**kp_config(alone.client_config("eve")), max_block_ms=15_000)
        try:
            with pytest.raises(kafka.errors.KafkaError, match="InitProducerId.*ClusterAuthorizationFailed"):
                eve.send("eve-topic", b"x").get(15)
        finally:
            eve.close(timeout=5)


def test_acls_are_durable(tmp_path: Path) -> None:
    settings = {"sasl": {"admin": "pw"}, "authorizer": True, "super_users": ["User:admin"]}
    binding = AclBinding(TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice", "*", A.READ,
                         AclPermissionType.ALLOW)
    with Broker(str(tmp_path), **settings) as first:
        client = AdminClient(first.client_config("admin"))
        for future in client.create_acls([binding]).values():
            future.result(15)
    with Broker(str(tmp_path), **settings) as second:
        client = AdminClient(second.client_config("admin"))
        listed = client.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, A.ANY, AclPermissionType.ANY)).result(15)
    assert listed == [binding]


def test_without_an_authorizer_everything_is_allowed_and_acl_apis_say_security_is_disabled() -> None:
    with Broker() as plain:
        client = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        binding = AclBinding(TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*", A.READ, AclPermissionType.ALLOW)
        with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
            for future in client.create_acls([binding]).values():
                future.result(15)
        assert ck_produce({"bootstrap.servers": plain.bootstrap_servers}, "anyone", "") is None


def as_user(broker: Broker, user: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A stream/topic command over SASL, logged in with a Kafka client properties file."""
    config = tmp_path / f"{user}.properties"
    config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={user}\n"
                      f"sasl.password={USERS[user]}\n")
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server", broker.bootstrap_servers,
                           "--command-config", str(config)], capture_output=True, text=True, timeout=60)


def test_a_users_new_stream_grants_what_is_not_given_to_that_user_and_admin_is_checked(
        broker: Broker, tmp_path: Path) -> None:
    stream = f"/apps/{fresh('alices')}"
    assert as_user(broker, "bob", tmp_path, "stream", "create", stream).returncode == 1  # no CREATE on the cluster
    for future in admin(broker).create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster",
                                                        ResourcePatternType.LITERAL, "User:alice", "*", A.CREATE,
                                                        AclPermissionType.ALLOW)]).values():
        future.result(15)
    made = as_user(broker, "alice", tmp_path, "stream", "create", stream, "--produceperm", "g:ops", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["permissions"] == {
        "produce": "g:ops", "consume": "u:alice", "topic": "u:alice", "admin": "u:alice", "copy": "u:alice"}
    refused = as_user(broker, "bob", tmp_path, "stream", "edit", stream, "--ttl", "1h")
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(f"User:bob may not stream edit of stream {stream} "
                                           "(needs the stream's admin permission)")
    assert as_user(broker, "alice", tmp_path, "stream", "edit", stream, "--ttl", "1h").returncode == 0
    # alice's topic permission lets her make topics there; bob's listing of streams does not show it
    assert as_user(broker, "alice", tmp_path, "topic", "create", f"{stream}:t1").returncode == 0
    assert stream not in as_user(broker, "bob", tmp_path, "stream", "list").stdout
    assert stream in as_user(broker, "alice", tmp_path, "stream", "list").stdout


def test_replication_into_a_stream_needs_its_copy_permission(broker: Broker, tmp_path: Path) -> None:
    """StreamReplicate (the private API a source cluster's link writes with) is checked like the rest."""
    from kafkacompat.handlers import stream_replicate

    stream = f"/apps/{fresh('replica')}"
    assert cli(broker, "stream", "create", stream, "--copyperm", "u:alice").returncode == 0

    class Asking:  # what the handler reads of a request from a link logged in as `principal`
        def __init__(self, principal: str) -> None:
            self.cluster, self.principal, self.peer = broker.server.cluster, principal, "127.0.0.1:1"
            self.header = None

    def hello(principal: str) -> bytes:
        return broker.call(stream_replicate.handle(Asking(principal), ({"op": "hello", "stream": stream},
                                                                      memoryview(b""))))

    assert b"User:bob may not replicate into stream" in hello("User:bob")
    assert b"may not replicate" not in hello("User:alice")


def test_share_state_kept_for_other_workers_needs_cluster_action(broker: Broker) -> None:
    """WorkerState (the private API workers of `serve --workers N` keep their share-group state and
    aborted transactions at worker 0 with, and worker 0's console and /metrics read the others'
    partitions and figures with) asks CLUSTER_ACTION on the cluster for every operation, as
    Kafka asks its brokers."""
    from kafkacompat.protocol.admin_api import decode_response_with_payload

    from kafkacompat.handlers import worker_state

    class Asking:  # what the handler reads of a request from a worker logged in as `principal`
        def __init__(self, principal: str) -> None:
            self.cluster, self.principal, self.peer = broker.server.cluster, principal, "127.0.0.1:1"
            self.header = None

    def ask(principal: str, body: dict) -> dict:
        answer = b"\0\0\0\1" + broker.call(worker_state.handle(Asking(principal), body))  # as after its header
        reply = decode_response_with_payload(answer)[1]  # partition.read's records follow its JSON
        return {"error_code": reply.error_code, "error": reply.error}

    admin(broker).create_topics([NewTopic("worker-read", 1)])["worker-read"].result(15)
    partition = {"stream": "/default", "topic": "worker-read", "partition": 0}
    every_op = ({"op": "traffic.read"}, {"op": "share_state.forget", "keys": []},
                {"op": "replica_paths.read", "stream": "/default", "key": "worker-read/0"},
                {"op": "replica_paths.write", "stream": "/default", "records": {}},
                {"op": "metrics.read"}, {"op": "partition.figures", **partition},
                {"op": "partitions.figures", "partitions": [["/default", "worker-read", 0]]},
                {"op": "partition.read", **partition, "offset": 0, "max_bytes": 1024},
                {"op": "partition.offset_for_timestamp", **partition, "timestamp": 0})
    for body in every_op:
        refused = ask("User:worker", body)
        assert refused["error_code"] == 31 and "needs CLUSTER_ACTION" in refused["error"], body  # CLUSTER_AUTH...
    for future in admin(broker).create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster",
                                                        ResourcePatternType.LITERAL, "User:worker", "*",
                                                        AclOperation.CLUSTER_ACTION,
                                                        AclPermissionType.ALLOW)]).values():
        future.result(15)
    deadline = time.monotonic() + 15
    while ask("User:worker", every_op[0])["error_code"] != 0:
        assert time.monotonic() < deadline, "CLUSTER_ACTION granted, still refused"
        time.sleep(0.1)
    assert [ask("User:worker", body)["error_code"] for body in every_op] == [0] * len(every_op)


def test_the_rest_proxy_is_authorized_as_its_principal() -> None:
    """REST calls go through the same handlers as User:ANONYMOUS on a port served open: refused unless granted."""
    import requests

    with Broker(authorizer=True, super_users=["User:admin"], http_port=0, http_open=True) as secured:
        secured.create_topic("orders", partitions=1)
        (cluster,) = requests.get(secured.http_url + "/v3/clusters", timeout=10).json()["data"]
        records = f"{secured.http_url}/v3/clusters/{cluster['cluster_id']}/topics/orders/records"
        record = {"value": {"type": "STRING", "data": "paid"}}
        refused = requests.post(records, json=record, timeout=15).json()  # v3 answers each record in the body
        assert (refused["error_code"], refused["message"]) == (40301, "TOPIC_AUTHORIZATION_FAILED"), refused
        secured.call(secured.server.cluster.authorizer.acls.add([acls.AclBinding(
            acls.ResourceType.TOPIC, "orders", acls.PatternType.LITERAL, "User:ANONYMOUS", "*", acls.Operation.WRITE,
            acls.Permission.ALLOW)]))
        written = requests.post(records, json=record, timeout=15).json()
        assert (written["error_code"], written["offset"]) == (200, 0), written
