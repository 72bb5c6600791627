"""What worker 0 of `serve --workers N` keeps for all workers counts on every worker, as users change it.

Worker 0 alone writes the store's settings and state tables. The others
read them at their start, and served them as they were then: an ACL created
or deleted afterwards did not count on worker 1, nor did a group config set
afterwards, so a share group whose partitions were worker 1's started at the
end of the log whatever `share.auto.offset.reset` said. And worker 1 could
not write its share-partitions' state at all, so their acknowledgements were
never answered. Each test fails on the code before.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafkacompat.protocol.records import Record, build_batch
from kafkacompat.storage.disk.shared import owner_of
from kio.schema.errors import ErrorCode

from compat_tests.drivers.java import program_41, run_program
from tests.test_bad_input import PRODUCE_V, produce_request
from tests.wire import Wire
from tests.workers.test_workers import Workers, create_topic

pytestmark = pytest.mark.slow

DEFAULT_STREAM = "/default"


def owned_by(index: int, prefix: str) -> str:
    """A topic name whose only partition worker `index` of two owns."""
    while True:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if owner_of(2, DEFAULT_STREAM, name, 0) == index:
            return name


def produce_error(port: int, topic: str, partition: int = 0) -> str:
    """The error of one record produced to a partition of `topic` at the broker on `port` itself (a
    client library would also ask the other worker, whose Metadata knows the ACLs)."""
    with Wire(f"127.0.0.1:{port}") as wire:
        batch = build_batch([Record(None, b"x", [], 0)])
        answer = wire.request(0, PRODUCE_V, produce_request(topic, batch, partition=partition))
    return ErrorCode(answer.responses[0].partition_responses[0].error_code).name


def wait_for_error(port: int, topic: str, wanted: str, timeout: float = 20, partition: int = 0) -> None:
    deadline = time.monotonic() + timeout
    while (got := produce_error(port, topic, partition)) != wanted:
        assert time.monotonic() < deadline, f"produce to {topic} still answers {got}, not {wanted}"
        time.sleep(0.2)


def test_acls_created_and_deleted_through_worker_0_count_on_worker_1(tmp_path: Path) -> None:
    workers = Workers(tmp_path / "data", 2, "--authorizer", "--allow-everyone-if-no-acl-found")
    try:
        topic = owned_by(1, "acl")
        create_topic(workers.bootstrap, topic, 1)
        worker1 = workers.ports[1]  # the owner: its own decision
        assert produce_error(worker1, topic) == "none"
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{workers.ports[0]}"})
        deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                          AclOperation.WRITE, AclPermissionType.DENY)
        admin.create_acls([deny])[deny].result(30)
        wait_for_error(worker1, topic, "topic_authorization_failed")
        same = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                                AclOperation.WRITE, AclPermissionType.DENY)
        for future in admin.delete_acls([same]).values():
            future.result(30)
        wait_for_error(worker1, topic, "none")
        assert workers.stop() == 0
    finally:
        workers.kill()


def test_a_share_group_reads_and_acknowledges_worker_1s_partition(tmp_path: Path) -> None:
    """ShareGroups.java's acks scenario (compat_tests/test_share_groups_java.py) on a topic of worker 1:
    its group config (earliest) is set through worker 0, its acknowledgements written at worker 0."""
    program = program_41("ShareGroups")  # skips without Kafka 4.1's client jars
    workers = Workers(tmp_path / "data", 2, "--group-share-record-lock-duration-ms", "3000",
                      "--group-initial-rebalance-delay-ms", "0")
    try:
        topic = owned_by(1, "share-acks")
        out = run_program(program, "acks", workers.bootstrap, topic=topic, group=topic)
        assert out["first"] == ["v0@0#1", "v1@1#1", "v2@2#1"] and out["commit"] == ["ok"], out
        assert out["redelivered"] == ["v1@1#2"], out
        assert workers.stop() == 0
    finally:
        workers.kill()


def test_share_group_offsets_altered_through_worker_0_count_at_worker_1(tmp_path: Path) -> None:
    """ShareGroups.java's reset scenario on a topic of worker 1: Admin.alterShareGroupOffsets of the empty
    group goes to worker 0 (the coordinator), which writes the state; the members that come next read from
    the new start offset at worker 1, where the share-partition was still held as before the reset."""
    program = program_41("ShareGroups")
    workers = Workers(tmp_path / "data", 2, "--group-share-record-lock-duration-ms", "3000",
                      "--group-initial-rebalance-delay-ms", "0")
    try:
        topic = owned_by(1, "share-reset")
        run_program(program, "acks", workers.bootstrap, topic=topic, group=topic)
        out = run_program(program, "reset", workers.bootstrap, topic=topic, group=topic)
        assert out == {"altered": "ok", "listed": "0", "read_again": ["v0@0#1", "v1@1#1", "v2@2#1"]}, out
        assert workers.stop() == 0
    finally:
        workers.kill()
