"""`kafkacompat serve --workers N` as users run it: one command, N broker processes over one disk store,
stock clients spreading their load over the workers through Metadata alone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kio.schema.alter_client_quotas.v1.request as quotas_v1
import kio.schema.alter_user_scram_credentials.v0.request as scram_v0
import kio.schema.create_acls.v3.request as acls_v3
import kio.schema.delete_acls.v3.request as delete_acls_v3
import kio.schema.describe_acls.v3.request as describe_acls_v3
import kio.schema.describe_client_quotas.v1.request as describe_quotas_v1
import kio.schema.describe_configs.v4.request as describe_configs_v4
import kio.schema.describe_user_scram_credentials.v0.request as describe_scram_v0
import kio.schema.find_coordinator.v2.request as find_v2
import kio.schema.incremental_alter_configs.v1.request as alter_v1
import kio.schema.metadata.v12.request as meta_v12
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafkacompat.protocol.messages import make
from kafkacompat.storage.disk.shared import owner_of
from kio.schema.errors import ErrorCode

from kafkacompat.cluster.membership import coordinator_partition
from tests.test_clients_produce_consume import consume_all, kafka_python_poll
from tests.wire import Wire

ROOT = Path(__file__).resolve().parent.parent.parent


class Workers:
    """A `serve --workers N` process and the ports its workers serve on, read from its log."""

    def __init__(self, data: Path, count: int, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(data), "--host", "127.0.0.1",
             "--port", "0", "--workers", str(count), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        )
        self.log: list[str] = []
        line = self.wait_for("workers serving on ports", 90)
        self.ports = [int(p) for p in re.findall(r"\d+", line.split("ports", 1)[1])]
        self.pids = [int(p) for p in re.findall(r"worker \d+ started \(pid (\d+)", "".join(self.log))]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def wait_for(self, needle: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            self.log.append(line)
            if needle in line:
                return line
            if not line and self.proc.poll() is not None:
                break
        raise AssertionError(f"never logged {needle!r}:\n{''.join(self.log)}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        status = self.proc.wait(timeout=60)
        self.log.append(self.proc.stdout.read())
        return status

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in {*self.pids, *map(int, re.findall(r"started \(pid (\d+)", "".join(self.log)))}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def workers(tmp_path: Path):
    running = Workers(tmp_path / "data", 2)
    yield running
    running.kill()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create a topic and wait until every worker lists it (workers other than 0 take in the
    controller's catalog changes within a moment, as Kafka brokers take in their controller's)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    for port in bootstrap_ports(bootstrap):
        deadline = time.monotonic() + 30
        while asked_at(port, name) != (ErrorCode.none, partitions):
            assert time.monotonic() < deadline, f"worker at port {port} never listed {name}"
            time.sleep(0.1)


def bootstrap_ports(bootstrap: str) -> list[int]:
    return [int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")]


def describe(metadata) -> str:
    """What a Metadata answer said, for an assertion's message."""
    brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    topics = {t.topic: (str(t.error), {p.id: (p.leader, str(p.error)) for p in t.partitions.values()})
              for t in metadata.topics.values()}
    return f"brokers {brokers}, answered by {metadata.orig_broker_name} ({metadata.orig_broker_id}), topics {topics}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_two_workers_split_the_partitions_and_serve_stock_clients(workers: Workers, tmp_path: Path) -> None:
    # bootstrapped at worker 1 alone: the admin client sends CreateTopics to the controller (worker 0)
    create_topic(f"127.0.0.1:{workers.ports[1]}", "spread", 6)
    create_topic(workers.bootstrap, "spread-wait", 1)  # waits until both workers list topics made before it
    metadata = AdminClient({"bootstrap.servers": workers.bootstrap}).list_topics("spread", timeout=30)
    assert sorted(b.port for b in metadata.brokers.values()) == sorted(workers.ports)
    leaders = {p.id: p.leader for p in metadata.topics["spread"].partitions.values()}
    assert len(leaders) == 6 and len(set(leaders.values())) == 2, f"partitions not split over two workers: {leaders}"

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{workers.ports[1]}"})
    for i in range(60):
        producer.produce("spread", f"c{i}".encode(), partition=i % 6)
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=f"127.0.0.1:{workers.ports[0]}")
    for i in range(60):
        kp.send("spread", f"k{i}".encode(), partition=i % 6)
    kp.flush(30)
    kp.close()

    got = consume_all(workers.bootstrap, "spread", 6, 120, timeout=60)
    assert sorted(m.value() for m in got) == sorted([f"c{i}".encode() for i in range(60)]
                                                  + [f"k{i}".encode() for i in range(60)])
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{workers.ports[1]}", auto_offset_reset="earliest")
    consumer.assign([TopicPartition("spread", p) for p in range(6)])
    consumer.seek_to_beginning()
    by_partition: dict[int, int] = {}
    for _offset, _key, value, _headers in kafka_python_poll(consumer, 120, timeout=60):
        i = int(value[1:])
        by_partition[i % 6] = by_partition.get(i % 6, 0) + 1
    assert by_partition == {p: 20 for p in range(6)}

    pids = list(workers.pids)
    assert len(pids) == 2 and all(alive(p) for p in pids)
    assert workers.stop() == 0
    assert not any(alive(p) for p in pids), "SIGTERM to the command stops every worker"
    assert (tmp_path / "data" / ".clean").exists(), "all workers stopped cleanly: the store is marked clean"
    assert json.loads((tmp_path / "data" / "store.json").read_bytes())["epoch"] == 2, \
        "store.json keeps the highest epoch a worker led under (worker 1's)"

    # the store reopens in one process with every message
    single = subprocess.Popen([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "data"),
                               "--host", "127.0.0.1", "--port", str(workers.ports[0])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        assert len(consume_all(f"127.0.0.1:{workers.ports[0]}", "spread", 6, 120, timeout=60)) == 120
    finally:
        single.send_signal(signal.SIGTERM)
        assert single.wait(60) == 0


@pytest.mark.slow
def test_the_data_dir_stays_locked_while_workers_run(workers: Workers, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "data"),
                           "--host", "127.0.0.1", "--port", "0"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 4
    assert "in use by another" in done.stderr


@pytest.mark.slow
def test_classic_groups_are_coordinated_by_the_owning_worker(workers: Workers) -> None:
    from confluent_kafka import Consumer

    create_topic(workers.bootstrap, "grouped", 4)
    producer = Producer({"bootstrap.servers": workers.bootstrap})
    for i in range(40):
        producer.produce("grouped", f"m{i}".encode(), partition=i % 4)
    assert producer.flush(30) == 0

    # two members bootstrapped at different workers: FindCoordinator sends both to worker 0
    members = [Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False}) for port in workers.ports]
    for member in members:
        member.subscribe(["grouped"])
    got: dict[int, list[bytes]] = {0: [], 1: []}
    deadline = time.monotonic() + 90
    while sum(map(len, got.values())) < 40 and time.monotonic() < deadline:
        for n, member in enumerate(members):
            msg = member.poll(0.2)
            if msg is not None and msg.error() is None:
                got[n].append(msg.value())
                member.commit(msg, asynchronous=False)
    assert sorted(got[0] + got[1]) == sorted(f"m{i}".encode() for i in range(40))
    assert got[0] and got[1], "the group's partitions are shared by both members"
    for member in members:
        member.close()

    for i in range(40, 44):
        producer.produce("grouped", f"m{i}".encode(), partition=i % 4)
    assert producer.flush(30) == 0
    # the committed offsets outlive the members: a new member reads only what came after
    consumer = KafkaConsumer("grouped", bootstrap_servers=f"127.0.0.1:{workers.ports[1]}", group_id="g1",
                             auto_offset_reset="earliest")
    assert sorted(v for _o, _k, v, _h in kafka_python_poll(consumer, 4, timeout=60)) == \
        sorted(f"m{i}".encode() for i in range(40, 44))


def coordinating_worker(key: str, count: int = 2) -> int:
    """The worker that coordinates a group or transactional id: the owner of its __consumer_offsets partition."""
    return owner_of(count, "/default", "__consumer_offsets", coordinator_partition(key, 50))


def keys_coordinated_by(count: int, prefix: str) -> list[str]:
    """One key per worker, the i-th coordinated by worker i."""
    found: dict[int, str] = {}
    for n in range(1000):
        found.setdefault(coordinating_worker(f"{prefix}-{n}", count), f"{prefix}-{n}")
    return [found[index] for index in range(count)]


@pytest.mark.slow
def test_a_first_find_coordinator_at_worker_1_names_the_owner_of_the_keys_offsets_partition(workers: Workers) -> None:
    # __consumer_offsets does not exist yet: worker 1 may not write the catalog, so worker 0 makes it;
    # before, worker 1 answered COORDINATOR_NOT_AVAILABLE and librdkafka asked it again every 10 s
    for key_type, prefix in ((0, "group"), (1, "txn")):
        for index, key in enumerate(keys_coordinated_by(2, prefix)):
            request = make(find_v2.FindCoordinatorRequest, key=key, key_type=key_type)
            with Wire(f"127.0.0.1:{workers.ports[1]}") as wire:
                answer = wire.request(10, 2, request)
            assert (answer.error_code, answer.port) == (ErrorCode.none, workers.ports[index]), (key, answer)


@pytest.mark.slow
def test_groups_coordinated_by_each_worker_keep_their_offsets_when_it_is_killed(workers: Workers) -> None:
    # Each worker coordinates the groups of the __consumer_offsets partitions it owns and writes their
    # cursors itself (before stop 61 worker 0 coordinated every group: its one core bounded them all).
    create_topic(workers.bootstrap, "spread", 4)
    producer = Producer({"bootstrap.servers": workers.bootstrap})

    def produce(start: int, end: int) -> None:
        for i in range(start, end):
            producer.produce("spread", f"m{i}".encode(), partition=i % 4)
        assert producer.flush(30) == 0

    def read(group: str, count: int) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["spread"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
        consumer.commit(asynchronous=False)
        consumer.close()
        return got

    groups = keys_coordinated_by(2, "spread")
    produce(0, 20)
    for group in groups:
        assert sorted(read(group, 20)) == sorted(f"m{i}".encode() for i in range(20))
    listed = {(c["group"], c["partition"]): c["offset"]
              for c in json.loads(cli(workers, "cursor", "list", "/default", "--json").stdout)}
    assert {key: offset for key, offset in listed.items() if key[0] in groups} == \
        {(group, p): 5 for group in groups for p in range(4)}, "worker 0 reads the cursors worker 1 wrote"

    os.kill(workers.pids[1], signal.SIGKILL)  # the coordinator of groups[1]
    workers.wait_for("worker 1 serves again", 60)
    produce(20, 24)
    for group in groups:  # the committed offsets outlive the coordinator: only what came after is read
        assert sorted(read(group, 4)) == sorted(f"m{i}".encode() for i in range(20, 24)), group


def asked(port: int, api_key: int, version: int, request) -> Any:
    """The answer of the worker at `port` itself to one request, sent over the wire."""
    with Wire(f"127.0.0.1:{port}") as wire:
        return wire.request(api_key, version, request)


def asked_at(port: int, topic: str, create: bool = False) -> tuple[int, int]:
    """(error code, partition count) that the worker at `port` itself answers for `topic` (a stock
    client sends Metadata to whichever broker it likes, so the request goes over the wire here)."""
    request = make(meta_v12.MetadataRequest, topics=(make(meta_v12.MetadataRequestTopic, name=topic, topic_id=None),),
                   allow_auto_topic_creation=create, include_topic_authorized_operations=False)
    answer = asked(port, 3, 12, request)
    return answer.topics[0].error_code, len(answer.topics[0].partitions)


def channel_connections(pid: int) -> int:
    """Connections other workers hold open on the Unix socket of the worker with this pid (workers/channel.py):
    an accepted Unix socket carries the path of the socket it came in on."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(1 for row in rows if len(row) == 8 and row[5] == "03" and f"socket:[{row[6]}]" in held)


@pytest.mark.slow
def test_workers_keep_their_connections_to_each_other_outside_the_client_limit(tmp_path: Path) -> None:
    # each request a worker sent another opened a connection, which counted among the client
    # connections and so toward --max-connections; Kafka's brokers keep their connections to each
    # other, and max.connections does not refuse them
    workers = Workers(tmp_path / "data", 2, "--max-connections", "2")
    try:
        for n in range(3):  # worker 1 has worker 0 make each topic
            assert asked_at(workers.ports[1], f"kept-{n}", create=True) == (ErrorCode.none, 1)
        deadline = time.monotonic() + 10
        while (held := channel_connections(workers.pids[0])) != 1:
            assert time.monotonic() < deadline, f"worker 0 holds {held} connections from worker 1, not one kept"
            time.sleep(0.1)
        request = make(meta_v12.MetadataRequest, topics=(make(meta_v12.MetadataRequestTopic, name="kept-2",
                                                                   topic_id=None),),
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        with Wire(f"127.0.0.1:{workers.ports[0]}") as first, Wire(f"127.0.0.1:{workers.ports[0]}") as second:
            for wire in (first, second):  # both client connections are served, beside worker 1's
                assert wire.request(3, 12, request).topics[0].error_code == ErrorCode.none
    finally:
        workers.kill()


def acls_at(port: int) -> list[tuple[str, str]]:
    """(resource name, principal) of every ACL the worker at `port` answers DescribeAcls with."""
    answer = asked(port, 29, 3, make(describe_acls_v3.DescribeAclsRequest, resource_type_filter=1,
                                     resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                                     host_filter=None, operation=1, permission_type=1))
    assert answer.error_code == ErrorCode.none, answer
    return sorted((r.resource_name, acl.principal) for r in answer.resources for acl in r.acls)


def shared_changes_at(port: int) -> tuple[list[str], list[float], dict[str, str]]:
    """What the worker at `port` says of the shared state the test changes: SCRAM users, alice's
    producer_byte_rate, the configs of group g and the brokers' default max.connections."""
    users = asked(port, 50, 0, make(describe_scram_v0.DescribeUserScramCredentialsRequest, users=None))
    quotas = asked(port, 48, 1, make(describe_quotas_v1.DescribeClientQuotasRequest, strict=False, components=(
        make(describe_quotas_v1.ComponentData, entity_type="user", match_type=0, match="alice"),)))
    configs = asked(port, 32, 4, make(describe_configs_v4.DescribeConfigsRequest, resources=(
        make(describe_configs_v4.DescribeConfigsResource, resource_type=32, resource_name="g",
             configuration_keys=("consumer.session.timeout.ms",)),
        make(describe_configs_v4.DescribeConfigsResource, resource_type=4, resource_name="",
             configuration_keys=("max.connections",)))))
    return ([u.user for u in users.results],
            [v.value for e in quotas.entries for v in e.values if v.key == "producer_byte_rate"],
            {c.name: c.value for r in configs.results for c in r.configs})


def broker_config_at(port: int, node_id: int, name: str) -> str | None:
    """The value of broker config `name` that the worker at `port` (node `node_id`) describes for itself."""
    answer = asked(port, 32, 4, make(describe_configs_v4.DescribeConfigsRequest, resources=(
        make(describe_configs_v4.DescribeConfigsResource, resource_type=4, resource_name=str(node_id),
             configuration_keys=(name,)),)))
    return next(c.value for r in answer.results for c in r.configs)


@pytest.mark.slow
def test_acls_users_quotas_and_configs_sent_to_worker_1_are_made_by_worker_0(tmp_path: Path) -> None:
    # Java's admin client sends CreateAcls, DeleteAcls, AlterUserScramCredentials, AlterClientQuotas and
    # changes of group configs and of the brokers' defaults to any broker, and a broker's own configs
    # to that broker (Kafka's brokers forward them to their controller); worker 1, which may not
    # write the store's shared state, refused them with KAFKA_STORAGE_ERROR
    workers = Workers(tmp_path / "data", 2, "--authorizer", "--super-user", "User:ANONYMOUS")
    try:
        one = workers.ports[1]
        created = asked(one, 30, 3, make(acls_v3.CreateAclsRequest, creations=(make(
            acls_v3.AclCreation, resource_type=2, resource_name="orders", resource_pattern_type=3,
            principal="User:alice", host="*", operation=3, permission_type=3),)))
        assert [r.error_code for r in created.results] == [ErrorCode.none], created
        user = asked(one, 51, 0, make(scram_v0.AlterUserScramCredentialsRequest, deletions=(), upsertions=(make(
            scram_v0.ScramCredentialUpsertion, name="alice", mechanism=1, iterations=8192, salt=b"salt" * 4,
            salted_password=b"p" * 32),)))
        assert [r.error_code for r in user.results] == [ErrorCode.none], user
        quota = asked(one, 49, 1, make(quotas_v1.AlterClientQuotasRequest, validate_only=False, entries=(make(
            quotas_v1.EntryData, entity=(make(quotas_v1.EntityData, entity_type="user", entity_name="alice"),),
            ops=(make(quotas_v1.OpData, key="producer_byte_rate", value=1048576.0, remove=False),)),)))
        assert [e.error_code for e in quota.entries] == [ErrorCode.none], quota
        configs = asked(one, 44, 1, make(alter_v1.IncrementalAlterConfigsRequest, validate_only=False, resources=(
            make(alter_v1.AlterConfigsResource, resource_type=32, resource_name="g", configs=(
                make(alter_v1.AlterableConfig, name="consumer.session.timeout.ms", config_operation=0,
                     value="50000"),)),
            make(alter_v1.AlterConfigsResource, resource_type=4, resource_name="", configs=(
                make(alter_v1.AlterableConfig, name="max.connections", config_operation=0, value="5000"),)))))
        assert [r.error_code for r in configs.responses] == [ErrorCode.none] * 2, configs
        expected = (["alice"], [1048576.0], {"consumer.session.timeout.ms": "50000", "max.connections": "5000"})
        for port in workers.ports:  # worker 0 made them; worker 1 has them in force from the answer on
            assert acls_at(port) == [("orders", "User:alice")]
            assert shared_changes_at(port) == expected

        # a broker's own configs, as kafka-configs.sh --entity-type brokers --entity-name ID sends them
        ids = {b.port: b.node_id for b in asked(one, 3, 12, make(
            meta_v12.MetadataRequest, topics=(), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False)).brokers}
        own = asked(one, 44, 1, make(alter_v1.IncrementalAlterConfigsRequest, validate_only=False, resources=(
            make(alter_v1.AlterConfigsResource, resource_type=4, resource_name=str(ids[one]), configs=(
                make(alter_v1.AlterableConfig, name="max.connections", config_operation=0, value="4000"),)),)))
        assert [r.error_code for r in own.responses] == [ErrorCode.none], own
        assert [broker_config_at(port, ids[port], "max.connections") for port in workers.ports] == ["5000", "4000"]

        deleted = asked(one, 31, 3, make(delete_acls_v3.DeleteAclsRequest, filters=(make(
            delete_acls_v3.DeleteAclsFilter, resource_type_filter=2, resource_name_filter="orders",
            pattern_type_filter=3, principal_filter=None, host_filter=None, operation=1, permission_type=1),)))
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1], deleted
        assert [acls_at(port) for port in workers.ports] == [[], []]
    finally:
        workers.kill()


@pytest.mark.slow
def test_topics_changed_through_worker_0_are_known_at_once_to_worker_1(workers: Workers) -> None:
    # A client may send Metadata to any broker right after CreateTopics answered (librdkafka does):
    # the killed-worker test's list_topics once got UNKNOWN_TOPIC_OR_PARTITION from worker 1, which
    # took in the controller's catalog only every 0.2 s.
    controller = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
    for n in range(5):
        name = f"at-once-{n}"
        controller.create_topics([NewTopic(name, 4, 1)])[name].result(30)
        assert asked_at(workers.ports[1], name) == (ErrorCode.none, 4)
    controller.create_partitions([NewPartitions("at-once-0", 6)])["at-once-0"].result(30)
    assert asked_at(workers.ports[1], "at-once-0") == (ErrorCode.none, 6)
    controller.delete_topics(["at-once-1"])["at-once-1"].result(30)
    assert asked_at(workers.ports[1], "at-once-1") == (ErrorCode.unknown_topic_or_partition, 0)


@pytest.mark.slow
def test_a_topic_auto_created_through_worker_1_is_made_by_worker_0(workers: Workers) -> None:
    # worker 1 does not write the catalog: it has worker 0 create the topic, as a Kafka broker
    # forwards auto-creation to its controller (it answered UNKNOWN_TOPIC_OR_PARTITION, and a
    # producer that reached only worker 1 waited for a topic nobody made)
    assert asked_at(workers.ports[1], "made-on-use", create=True) == (ErrorCode.none, 1)
    assert asked_at(workers.ports[0], "made-on-use") == (ErrorCode.none, 1)

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{workers.ports[1]}"})
    for i in range(10):
        producer.produce("first-use", f"m{i}".encode())
    assert producer.flush(30) == 0
    got = consume_all(f"127.0.0.1:{workers.ports[1]}", "first-use", 1, 10, timeout=60)
    assert sorted(m.value() for m in got) == sorted(f"m{i}".encode() for i in range(10))


@pytest.mark.slow
def test_topic_configs_changed_through_worker_1_are_made_by_worker_0(workers: Workers) -> None:
    # Java's admin client sends config changes to any broker; worker 1 refused them
    # (KAFKA_STORAGE_ERROR: only worker 0 writes the catalog), now it forwards them to worker 0
    create_topic(workers.bootstrap, "configured", 2)
    change = make(alter_v1.AlterConfigsResource, resource_type=2, resource_name="configured", configs=(
        make(alter_v1.AlterableConfig, name="retention.ms", config_operation=0, value="123456"),))
    with Wire(f"127.0.0.1:{workers.ports[1]}") as wire:
        answer = wire.request(44, 1, make(alter_v1.IncrementalAlterConfigsRequest, resources=(change,),
                                          validate_only=False))
    assert [(r.error_code, r.resource_name) for r in answer.responses] == [(ErrorCode.none, "configured")]
    for port in workers.ports:  # both workers serve the topic with the new value at once
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
        assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "123456"


@pytest.mark.slow
def test_a_stream_created_after_the_start_is_known_to_every_worker(workers: Workers) -> None:
    # worker 1 loaded the streams it found at its start and knew no later one until a restart
    subprocess.run([sys.executable, "-m", "kafkacompat", "stream", "create", "/apps/late", "--bootstrap-server",
                    f"127.0.0.1:{workers.ports[0]}"], check=True, capture_output=True, timeout=60, cwd=ROOT)
    name = "/apps/late:readings"
    controller = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
    controller.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    assert asked_at(workers.ports[1], name) == (ErrorCode.none, 2)

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{workers.ports[1]}"})
    for i in range(10):
        producer.produce(name, f"r{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    got = consume_all(f"127.0.0.1:{workers.ports[1]}", name, 2, 10, timeout=60)
    assert sorted(m.value() for m in got) == sorted(f"r{i}".encode() for i in range(10))


@pytest.mark.slow
def test_a_worker_restarted_after_topic_churn_leaves_the_catalog_to_worker_0(workers: Workers, tmp_path: Path) -> None:
    # 70 catalog lines for no live topic: a store opening it compacts it. A restarted worker 1 did,
    # and worker 0 went on appending to the file it replaced: topics made after were lost.
    controller = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
    names = [f"churn-{n}" for n in range(35)]
    for future in controller.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        future.result(30)
    for future in controller.delete_topics(names).values():
        future.result(30)
    os.kill(workers.pids[1], signal.SIGKILL)
    workers.wait_for("worker 1 serves again", 90)

    create_topic(workers.bootstrap, "after", 2)
    assert asked_at(workers.ports[1], "after") == (ErrorCode.none, 2)
    producer = Producer({"bootstrap.servers": workers.bootstrap})
    for i in range(10):
        producer.produce("after", f"m{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    assert workers.stop() == 0

    single = subprocess.Popen([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "data"),
                               "--host", "127.0.0.1", "--port", str(workers.ports[0])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        got = consume_all(f"127.0.0.1:{workers.ports[0]}", "after", 2, 10, timeout=60)
        assert sorted(m.value() for m in got) == sorted(f"m{i}".encode() for i in range(10))
    finally:
        single.send_signal(signal.SIGTERM)
        assert single.wait(60) == 0


@pytest.mark.slow
@pytest.mark.parametrize("spare", [True, False], ids=["spare", "no-spare"])
def test_a_killed_worker_is_restarted_and_loses_nothing_acknowledged(tmp_path: Path, spare: bool) -> None:
    workers = Workers(tmp_path / "data", 2, *(() if spare else ("--no-spare-worker",)))
    try:
        killed_and_restarted(workers, spare)
    finally:
        workers.kill()


def killed_and_restarted(workers: Workers, spare: bool) -> None:
    create_topic(workers.bootstrap, "survive", 4)
    metadata = AdminClient({"bootstrap.servers": workers.bootstrap}).list_topics("survive", timeout=30)
    worker1 = next(b.id for b in metadata.brokers.values() if b.port == workers.ports[1])
    owned = [p.id for p in metadata.topics["survive"].partitions.values() if p.leader == worker1]
    assert owned, f"worker 1 owns some of the partitions; Metadata said {describe(metadata)}"
    acked: list[bytes] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append(msg.value())

    producer = Producer({"bootstrap.servers": workers.bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 60000, "log_level": 2})
    for i in range(200):
        producer.produce("survive", f"a{i}".encode(), partition=i % 4, on_delivery=on_delivery)
    assert producer.flush(30) == 0 and len(acked) == 200

    spare_pid = int(re.search(r"pid (\d+)", workers.wait_for("spare worker started", 60))[1]) if spare else None
    os.kill(workers.pids[1], signal.SIGKILL)
    killed = time.monotonic()
    # produce to worker 1's partitions until one is acknowledged again: the time it is away
    back = None
    i = 200
    while back is None and time.monotonic() - killed < 90:
        producer.produce("survive", f"a{i}".encode(), partition=owned[i % len(owned)], on_delivery=on_delivery)
        i += 1
        before = len(acked)
        producer.flush(1)
        if len(acked) > before:
            back = time.monotonic() - killed
    assert back is not None, "worker 1's partitions never took produce again"
    assert producer.flush(60) == 0
    print(f"worker 1's partitions took produce again {back:.2f} s after it was killed; supervisor: "
          + workers.wait_for("worker 1 serves again", 30).strip())
    restarted = int(re.findall(r"worker 1 started \(pid (\d+)", "".join(workers.log))[-1])
    if spare:
        assert restarted == spare_pid, "the spare, started before the kill, took worker 1's place"
    else:
        assert restarted not in workers.pids and "spare" not in "".join(workers.log)

    got = consume_all(workers.bootstrap, "survive", 4, len(acked), timeout=60)
    assert set(acked) <= {m.value() for m in got}, "every acknowledged message is still there"
    assert workers.stop() == 0


@pytest.mark.slow
def test_the_spare_takes_the_place_of_any_dead_worker_the_controller_too(workers: Workers) -> None:
    # A fresh interpreter spends most of a worker's restart importing the broker (0.4 s idle here, 1.3-3.5 s
    # under load); the spare has done that before the death, so the dead worker's port is served again after
    # a store open. Worker 0 is the controller: topics are created and groups coordinated there.
    create_topic(workers.bootstrap, "spared", 2)
    for index in (1, 0):
        spare = int(re.search(r"pid (\d+)", workers.wait_for("spare worker started", 60))[1])
        assert alive(spare)
        os.kill(workers.pids[index], signal.SIGKILL)
        line = workers.wait_for(f"worker {index} started (pid", 30)
        assert f"(pid {spare}," in line and "the spare takes its place" in line, line
        workers.wait_for(f"worker {index} serves again", 30)
        workers.pids[index] = spare
    create_topic(workers.bootstrap, "created-after", 2)  # by worker 0, now the second spare
    producer = Producer({"bootstrap.servers": workers.bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for i in range(40):
        producer.produce("spared", f"s{i}".encode(), partition=i % 2)
        producer.produce("created-after", f"c{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0
    assert len(consume_all(workers.bootstrap, "spared", 2, 40, timeout=60)) == 40
    assert len(consume_all(workers.bootstrap, "created-after", 2, 40, timeout=60)) == 40
    spares = [int(p) for p in re.findall(r"spare worker started \(pid (\d+)", "".join(workers.log))]
    assert workers.stop() == 0
    assert not any(alive(p) for p in spares + workers.pids), "the command's stop stops its spare too"


@pytest.mark.slow
def test_a_client_connecting_while_a_worker_is_down_waits_for_it_instead_of_being_refused(workers: Workers) -> None:
    # The supervisor binds each worker's port once and hands the socket to every start of that worker. Before,
    # a dead worker's port refused connections until its restart listened again, and librdkafka doubled its
    # reconnect back-off at each refusal: it came back up to seconds after the worker did.
    create_topic(workers.bootstrap, "waits", 2)
    workers.proc.send_signal(signal.SIGSTOP)  # the supervisor cannot restart worker 1 until it is resumed
    try:
        os.kill(workers.pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while alive(workers.pids[1]) and not zombie(workers.pids[1]):
            assert time.monotonic() < deadline, "worker 1 never died"
            time.sleep(0.05)
        wire = Wire(f"127.0.0.1:{workers.ports[1]}", timeout=30)  # refused here before
        request = make(meta_v12.MetadataRequest,
                       topics=(make(meta_v12.MetadataRequestTopic, name="waits", topic_id=None),),
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        sent = wire.send(3, 12, request)
        wire.sock.settimeout(1.0)
        with pytest.raises(TimeoutError):  # nothing serves the port yet: the connection waits in its queue
            wire.sock.recv(1, socket.MSG_PEEK)
    finally:
        workers.proc.send_signal(signal.SIGCONT)
    wire.sock.settimeout(30)
    correlation, answer = wire.receive(3, 12)
    wire.close()
    assert correlation == sent and answer.topics[0].error_code == ErrorCode.none
    workers.wait_for("worker 1 serves again", 30)


def zombie(pid: int) -> bool:
    """Dead but not yet reaped by its parent (the supervisor, paused)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return False


def test_a_bad_worker_count_is_a_one_line_error(tmp_path: Path) -> None:
    for value in ("0", "lots"):
        done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "d"),
                               "--port", "0", "--workers", value], capture_output=True, text=True, cwd=ROOT,
                              timeout=60)
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "--workers" in done.stderr, done.stderr
    assert not (tmp_path / "d").exists(), "nothing is created before the settings are understood"


def test_a_workers_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    # the supervisor binds every worker's port before any worker starts: the second one is taken here
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", first + 1))
        except OSError:
            taken.close()
            continue
        taken.listen()
        with taken:
            done = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "d"),
                                   "--host", "127.0.0.1", "--port", str(first), "--workers", "2"],
                                  capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert done.returncode == 3, done.stderr
        assert done.stderr.count("\n") == 1 and f"127.0.0.1:{first + 1} (worker 1)" in done.stderr \
            and "already in use" in done.stderr, done.stderr
        assert "started" not in done.stdout + done.stderr, "no worker starts"
        return
    pytest.skip("no two adjacent free ports found")


def test_auto_is_one_worker_per_usable_core() -> None:
    from kafkacompat.workers.role import worker_count

    assert worker_count("auto") == len(os.sched_getaffinity(0))
    assert worker_count("3") == 3


def cli(workers: Workers, *args: str, worker: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server",
                           f"127.0.0.1:{workers.ports[worker]}"], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.slow
def test_the_cli_creates_a_stream_topic_whose_partitions_both_workers_own(workers: Workers) -> None:
    # The workers fault campaign's setup found it: `topic create` made the topic, then answered
    # "partition /chaos:a/0 belongs to another worker" (exit 1) while counting its messages.
    assert cli(workers, "stream", "create", "/s").returncode == 0
    made = cli(workers, "topic", "create", "/s:t", "--partitions", "4", "--json")
    assert made.returncode == 0, made.stderr
    view = json.loads(made.stdout)
    assert view["partitions"] == 4 and "unreadable" not in view, view.get("unreadable")  # every worker's partitions counted
    listed = Producer({"bootstrap.servers": workers.bootstrap}).list_topics("/s:t", timeout=30).topics["/s:t"]
    assert sorted(listed.partitions) == [0, 1, 2, 3] and listed.error is None


@pytest.mark.slow
def test_stream_topic_and_cursor_commands_sent_to_worker_1_are_run_by_worker_0(workers: Workers) -> None:
    # Worker 1 may not write the catalog or cursors, and never reads the cursors worker 0 writes: `stream
    # create` sent to its port failed ("only worker 0 ... changes the catalog") and `cursor list` there
    # showed the cursors as they were at its start.
    def at_1(*args: str) -> subprocess.CompletedProcess:
        done = cli(workers, *args, worker=1)
        assert done.returncode == 0, done.stderr
        return done

    at_1("stream", "create", "/w1")
    at_1("topic", "create", "/w1:t", "--partitions", "2")
    producer = Producer({"bootstrap.servers": workers.bootstrap})
    for i in range(6):
        producer.produce("/w1:t", f"r{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    reader = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": "readers", "enable.auto.commit": False})
    reader.assign([confluent_kafka.TopicPartition("/w1:t", p, 0) for p in range(2)])
    got, deadline = 0, time.monotonic() + 60
    while got < 6 and time.monotonic() < deadline:
        got += len([m for m in reader.consume(10, 0.5) if m.error() is None])
    assert got == 6
    reader.commit(asynchronous=False)  # to the group's coordinator, which writes the cursors
    reader.close()

    def cursors(worker: int) -> dict[tuple[str, int], int]:
        done = cli(workers, "cursor", "list", "/w1", "--json", worker=worker)
        assert done.returncode == 0, done.stderr
        return {(c["group"], c["partition"]): c["offset"] for c in json.loads(done.stdout)}

    assert cursors(1) == cursors(0) == {("readers", 0): 3, ("readers", 1): 3}
    at_1("cursor", "delete", "/w1", "--group", "readers")
    assert cursors(0) == {}
    refused = cli(workers, "stream", "create", "/w1", worker=1)
    assert refused.returncode != 0 and "already exists" in refused.stderr
    at_1("stream", "delete", "/w1")
    assert "does not exist" in cli(workers, "stream", "info", "/w1").stderr


@pytest.mark.slow
def test_a_new_command_waits_out_the_workers_of_a_killed_supervisor(workers: Workers, tmp_path: Path) -> None:
    # The workers fault campaign's kill-supervisor found it: the killed supervisor's workers outlived it by
    # 1-2 s (a paused one for as long as it is paused, with the store open) while a new command took the
    # data dir's lock and started workers of its own over the same partitions.
    os.kill(workers.pids[1], signal.SIGSTOP)
    workers.proc.kill()
    workers.proc.wait()
    try:
        second = subprocess.run([sys.executable, "-m", "kafkacompat", "serve", "--data-dir", str(tmp_path / "data"),
                                 "--host", "127.0.0.1", "--port", "0", "--workers", "2"], capture_output=True,
                                text=True, cwd=ROOT, timeout=60)
        assert alive(workers.pids[1])
        assert second.returncode == 4 and "in use by another" in second.stderr, second.stderr[-2000:]
    finally:
        os.kill(workers.pids[1], signal.SIGCONT)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers.pids):  # orphaned, they stop by themselves
        assert time.monotonic() < deadline, "the orphaned workers never stopped"
        time.sleep(0.1)
    again = Workers(tmp_path / "data", 2)
    try:
        assert again.stop() == 0
    finally:
        again.kill()


@contextlib.contextmanager
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs to fill (skips the test where it cannot be mounted)."""
    volume = tmp_path / "disk"
    volume.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(volume)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root): no full disk to start on")
    try:
        yield volume
    finally:
        subprocess.run(["umount", "-l", str(volume)], capture_output=True)


def fill(volume: Path) -> None:
    """Write until not one more byte fits."""
    with open(volume / "filler", "ab", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1 << 9):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError:
                pass


@pytest.mark.slow
def test_workers_start_again_on_a_full_disk(tmp_path: Path) -> None:
    # The workers fault campaign's full-disk-sigterm found it: stopped and started again while the disk
    # was full, the supervisor died with a traceback writing workers.json for worker 1 (worker 0 served;
    # a single broker starts on a full disk).
    with small_disk(tmp_path) as volume:
        first = Workers(volume / "data", 2)
        try:
            fill(volume)
            assert first.stop() == 0, "".join(first.log)[-3000:]
        finally:
            first.kill()
        again = Workers(volume / "data", 2)  # raises unless both workers serve
        try:
            assert again.stop() == 0
        finally:
            again.kill()


@pytest.mark.slow
def test_workers_start_on_a_full_disk_over_an_earlier_releases_record(tmp_path: Path) -> None:
    # An earlier release wrote workers.json without padding or checksum, and no copy: on a full disk
    # neither could be written (no block for a new file, the old one too short to rewrite in place) and
    # the supervisor died with a traceback instead of starting as a single broker does.
    with small_disk(tmp_path) as volume:
        data = volume / "data"
        first = Workers(data, 2)
        try:
            assert first.stop() == 0, "".join(first.log)[-3000:]
        finally:
            first.kill()
        (data / "workers.copy.json").unlink()
        (data / "workers.json").write_text(json.dumps({"epochs": [1, 2]}))
        fill(volume)
        again = Workers(data, 2)  # raises unless both workers serve
        try:
            assert any("no record of the leader epochs" in line for line in again.log), "".join(again.log)[-3000:]
            assert again.stop() == 0
        finally:
            again.kill()


def leader_epochs(port: int, topic: str) -> dict[int, int]:
    """Each partition's leader epoch as the worker at `port` advertises it in Metadata (the epoch clients
    cache and fence stale Metadata with, KIP-320; confluent-kafka's list_topics does not show it)."""
    request = make(meta_v12.MetadataRequest, topics=(make(meta_v12.MetadataRequestTopic, name=topic, topic_id=None),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with Wire(f"127.0.0.1:{port}") as wire:
        answer = wire.request(3, 12, request)
    return {p.partition_index: p.leader_epoch for p in answer.topics[0].partitions}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbled", "deleted"])
def test_leader_epochs_never_go_back_whatever_became_of_workers_json(tmp_path: Path, damage: str) -> None:
    # Found by the workers fault campaign's author: the whole command killed with -9 after a worker's
    # restart (store.json never raised) and workers.json garbled or lost, the next start fell back to
    # store.json's epoch and handed worker 1 the epoch it already led under: clients that cached it
    # take the new leader's Metadata for stale (KIP-320), and the epoch no longer fences anything.
    data = tmp_path / "data"
    first = Workers(data, 2)
    try:
        create_topic(first.bootstrap, "fenced", 4)
        os.kill(first.pids[1], signal.SIGKILL)
        first.wait_for("worker 1 serves again", 90)
        before = {}
        for port in first.ports:  # each worker advertises every partition: its own and the other's
            for partition, epoch in leader_epochs(port, "fenced").items():
                before[partition] = max(before.get(partition, -1), epoch)
        assert len(before) == 4
    finally:
        first.pids = [int(p) for p in re.findall(r"worker \d+ started \(pid (\d+)", "".join(first.log))]
        first.kill()  # every process of the command, the restarted worker too
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in first.pids):
        assert time.monotonic() < deadline, "the killed workers never went away"
        time.sleep(0.1)
    records = [data / "workers.json", data / "workers.copy.json"]
    if damage == "garbled":
        records[0].write_bytes(b'{"epochs": [1, ')  # as torn by a full disk's in-place rewrite
    else:
        records[0].unlink()
    again = Workers(data, 2)
    try:
        for port in again.ports:
            after = leader_epochs(port, "fenced")
            assert all(after[p] > before[p] for p in before), \
                f"leader epochs went back (worker at port {port}): before {before}, after {after}"
        if damage == "garbled":
            assert any("workers.json is garbled or torn" in line for line in again.log), "".join(again.log)[-3000:]
        producer = Producer({"bootstrap.servers": again.bootstrap})
        for i in range(8):
            producer.produce("fenced", f"m{i}".encode(), partition=i % 4)
        assert producer.flush(30) == 0
        assert again.stop() == 0
    finally:
        again.kill()


@pytest.mark.parametrize("workers_json, expected", [
    (None, [7, 9]),  # the supervisor's rewrite of workers.json torn by a full disk: the copy is whole
    (b'{"epochs": [7, 8]}', [7, 9]),  # an older record (the copy was written after it): the higher epoch
    (b'{"epochs": [5, 6, 4]}', [5, 6, 4]),  # another worker count: workers.json, written first
], ids=["torn", "older", "other-count"])
def test_workers_learn_each_others_epochs_from_either_record(tmp_path: Path, workers_json: bytes | None,
                                                             expected: list[int]) -> None:
    # A worker advertises the partitions of the others under their leader epochs as it reads them; a
    # torn workers.json made it advertise none, and an older one epochs lower than their owner's.
    from kafkacompat.workers.view import epochs_record, read_epochs

    (tmp_path / "workers.json").write_bytes(workers_json or b'{"epochs": [7, ')
    (tmp_path / "workers.copy.json").write_bytes(epochs_record([7, 9]))
    assert read_epochs(str(tmp_path)) == expected
