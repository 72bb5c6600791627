"""An ACL created or deleted through one broker of a PostgreSQL + S3 cluster counts on every broker.

Each broker kept its ACLs in memory as they were at its start: a DENY added
through broker 1 left writes to the partitions broker 2 leads allowed until
broker 2 restarted (and a deleted ACL kept refusing there). The store keeps
every broker's copy of the table current; the authorizer now follows it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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

from kafkacompat.testing.cluster import BrokerCluster
from tests.workers.test_worker_shared_state import produce_error, wait_for_error

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "guarded"


@pytest.fixture
def cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    with BrokerCluster(2, [*cloud_args, "--authorizer", "--allow-everyone-if-no-acl-found"]) as running:
        yield running


def test_an_acl_made_through_one_broker_counts_at_the_other(cluster: BrokerCluster) -> None:
    first, second = cluster.broker(1), cluster.broker(2)
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    metadata = admin.list_topics(TOPIC, timeout=30)
    led = [p.id for p in metadata.topics[TOPIC].partitions.values() if p.leader == 2]
    assert led, f"broker 2 leads none of {TOPIC}'s partitions"
    port = int(second.bootstrap.rsplit(":", 1)[1])
    wait_for_error(port, TOPIC, "none", partition=led[0])

    deny = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      AclOperation.WRITE, AclPermissionType.DENY)
    admin.create_acls([deny])[deny].result(30)
    wait_for_error(port, TOPIC, "topic_authorization_failed", partition=led[0])

    same = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                            AclOperation.WRITE, AclPermissionType.DENY)
    for future in admin.delete_acls([same]).values():
        future.result(30)
    wait_for_error(port, TOPIC, "none", partition=led[0])
    assert produce_error(port, TOPIC, partition=led[0]) == "none"
