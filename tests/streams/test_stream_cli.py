"""The admin CLI against a running broker: what a user types and what they read back."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafkacompat.storage import Cursor

from .conftest import block_values, table_rows


def produce(broker, topic: str, count: int, partition: int = 0) -> list[int]:
    """Send `count` messages with confluent-kafka; their offsets."""
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), partition=partition,
                         on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
    assert producer.flush(30) == 0
    return offsets


def consume_all(broker, topic: str, partition: int = 0) -> list[bytes]:
    """Every message a consumer starting at the earliest offset gets, until it reaches the end."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "reader",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, low)])
        got = []
        while low + len(got) < high:
            msg = consumer.poll(10)
            assert msg is not None, f"no message at offset {low + len(got)} of {topic}"
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        return got
    finally:
        consumer.close()


def test_stream_create_stores_every_policy_and_shows_it(cli, cli_json, stream_path):
    out = cli("stream", "create", stream_path, "--ttl", "7d", "--partitions", "3", "--autocreate", "false",
              "--fsync", "always", "--partitionlet-size", "64MB", "--produce-perm", "u:alice | g:iot",
              "--consume-perm", "g:analysts", "--topic-perm", "u:bob", "--admin-perm", "u:root")
    assert out.startswith(f"Created stream {stream_path}.")

    info = block_values(cli("stream", "info", stream_path))
    assert info["Stream"] == stream_path
    assert info["Time-to-live"] == "7d (604800 s)"
    assert info["Default partitions"] == "3"
    assert info["Autocreate"] == "false"
    assert info["Fsync"] == "always"
    assert info["Partitionlet size"] == "64 MiB"
    assert info["Produce permission"] == "u:alice | g:iot"
    assert info["Consume permission"] == "g:analysts"
    assert info["Topic permission"] == "u:bob"
    assert info["Admin permission"] == "u:root"
    assert info["Topics"] == "0"

    as_json = cli_json("stream", "info", stream_path)
    assert as_json["ttl_seconds"] == 604800
    assert as_json["partitionlet_bytes"] == 64 * 2**20
    assert as_json["permissions"]["produce"] == "u:alice | g:iot"

    rows = {r["PATH"]: r for r in table_rows(cli("stream", "list", "/tests"), "PATH")}
    assert "/default" not in rows
    assert rows[stream_path] == {"PATH": stream_path, "TOPICS": "0", "TTL": "7d", "PARTITIONS": "3",
                                 "AUTOCREATE": "false", "FSYNC": "always", "PARTITIONLET-SIZE": "64 MiB"}


def test_stream_edit_changes_only_the_flags_given(cli, cli_json, stream_path):
    cli("stream", "create", stream_path, "--ttl", "3600", "--partitions", "2", "--consume-perm", "g:a")
    before = cli_json("stream", "info", stream_path)
    out = cli("stream", "edit", stream_path, "--ttl", "12h", "--admin-perm", "u:ops")
    assert out.startswith(f"Updated stream {stream_path}.")
    after = cli_json("stream", "info", stream_path)
    assert after["ttl_seconds"] == 12 * 3600
    assert after["permissions"] == {**before["permissions"], "admin": "u:ops"}
    assert {k: v for k, v in after.items() if k not in ("ttl_seconds", "permissions")} == {
        k: v for k, v in before.items() if k not in ("ttl_seconds", "permissions")
    }
    assert block_values(cli("stream", "info", stream_path))["Time-to-live"] == "12h (43200 s)"


def test_topics_by_every_spelling_with_partition_detail(broker, cli, stream_path):
    cli("stream", "create", stream_path, "--partitions", "2")
    alias = stream_path[1:].replace("/", ".") + "..Temperature"
    out = cli("topic", "create", f"{stream_path}:Pressure")
    assert out.strip() == (f"Created topic {stream_path}:Pressure with 2 partitions "
                           f"(Kafka name {stream_path[1:].replace('/', '.')}..Pressure).")
    cli("topic", "create", alias, "--partitions", "3", "--config", "retention.ms=60000")

    assert produce(broker, f"{stream_path}:Pressure", 5, partition=1) == [0, 1, 2, 3, 4]

    listing = {r["TOPIC"]: r for r in table_rows(cli("topic", "list", stream_path), "TOPIC")}
    assert listing["Pressure"]["PARTITIONS"] == "2"
    assert listing["Pressure"]["MESSAGES"] == "5"
    assert listing["Temperature"]["KAFKA-NAME"] == alias
    assert listing["Temperature"]["PARTITIONS"] == "3"

    info = cli("topic", "info", alias)
    assert block_values(info)["Configs"] == "retention.ms=60000"
    info = cli("topic", "info", f"{stream_path}:Pressure")
    assert block_values(info)["Messages"] == "5"
    partitions = table_rows(info, "PARTITION  START")
    assert [(p["PARTITION"], p["START"], p["END"], p["MESSAGES"]) for p in partitions] == [
        ("0", "0", "0", "0"), ("1", "0", "5", "5")]
    lets = table_rows(info, "PARTITION  PARTITIONLET")
    assert [(p["PARTITION"], p["OFFSETS"], p["STATE"]) for p in lets] == [("1", "0-4", "active")]

    out = cli("topic", "edit", f"{stream_path}:Pressure", "--partitions", "4")
    assert "4 partitions" in out
    assert block_values(cli("topic", "info", f"{stream_path}:Pressure"))["Partitions"] == "4"

    assert cli("topic", "delete", alias).strip() == f"Deleted topic Temperature from stream {stream_path}."
    assert [r["TOPIC"] for r in table_rows(cli("topic", "list", stream_path), "TOPIC")] == ["Pressure"]


def test_cursors_listed_with_lag_and_deleted(broker, cli, cli_json, stream_path):
    cli("stream", "create", stream_path)
    cli("topic", "create", f"{stream_path}:Pressure", "--partitions", "2")
    produce(broker, f"{stream_path}:Pressure", 10, partition=0)
    produce(broker, f"{stream_path}:Pressure", 4, partition=1)
    store = broker.server.store  # groups commit through OffsetCommit once consumer groups land
    broker.call(store.commit_cursors(stream_path, "dashboards", [Cursor("Pressure", 0, 7), Cursor("Pressure", 1, 4)]))
    broker.call(store.commit_cursors(stream_path, "alerts", [Cursor("Pressure", 0, 2)]))

    rows = table_rows(cli("cursor", "list", stream_path), "GROUP")
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["OFFSET"], r["END"], r["LAG"]) for r in rows] == [
        ("alerts", "Pressure", "0", "2", "10", "8"),
        ("dashboards", "Pressure", "0", "7", "10", "3"),
        ("dashboards", "Pressure", "1", "4", "4", "0"),
    ]
    only = cli_json("cursor", "list", stream_path, "--group", "dashboards", "--topic", "Pressure")
    assert [(c["partition"], c["lag"]) for c in only] == [(0, 3), (1, 0)]

    out = cli("cursor", "delete", stream_path, "--group", "dashboards", "--topic", "Pressure", "--partition", "1")
    assert out.strip() == f"Deleted 1 cursor of group dashboards in stream {stream_path}."
    rows = table_rows(cli("cursor", "list", stream_path, "--group", "dashboards"), "GROUP")
    assert [(r["PARTITION"], r["OFFSET"]) for r in rows] == [("0", "7")]

    out = cli("cursor", "delete", stream_path, "--group", "alerts")
    assert out.strip() == f"Deleted 1 cursor of group alerts in stream {stream_path}."
    rows = table_rows(cli("cursor", "list", stream_path), "GROUP")
    assert [(r["GROUP"], r["PARTITION"]) for r in rows] == [("dashboards", "0")]


def test_purge_empties_topics_and_cursors_and_offsets_go_on(broker, cli, stream_path):
    cli("stream", "create", stream_path)
    topic = f"{stream_path}:Warnings"
    cli("topic", "create", topic)
    produce(broker, topic, 5)
    broker.call(broker.server.store.commit_cursors(stream_path, "g", [Cursor("Warnings", 0, 3)]))

    out = cli("stream", "purge", stream_path)
    assert out.strip() == f"Purged stream {stream_path}: emptied 1 topic and deleted its cursors."
    partitions = table_rows(cli("topic", "info", topic), "PARTITION  START")
    assert [(p["START"], p["END"], p["MESSAGES"]) for p in partitions] == [("5", "5", "0")]
    assert consume_all(broker, topic) == []
    assert cli("cursor", "list", stream_path).strip() == "No cursors."
    assert produce(broker, topic, 1) == [5]
    assert consume_all(broker, topic) == [b"m0"]


def test_stream_delete_takes_topics_and_cursors_with_it(broker, cli, stream_path):
    cli("stream", "create", stream_path)
    topic = f"{stream_path}:Pressure"
    cli("topic", "create", topic)
    produce(broker, topic, 3)
    broker.call(broker.server.store.commit_cursors(stream_path, "g", [Cursor("Pressure", 0, 3)]))

    out = cli("stream", "delete", stream_path)
    assert out.strip() == f"Deleted stream {stream_path} with its topics and cursors."
    assert stream_path not in cli("stream", "list")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "allow.auto.create.topics": False})
    gone = admin.list_topics(topic, timeout=10).topics[topic]
    assert gone.error is not None and gone.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    cli("stream", "create", stream_path)
    assert cli("topic", "list", stream_path).strip() == "No topics."
    assert cli("cursor", "list", stream_path).strip() == "No cursors."


def test_stream_cleanup_policy_is_the_default_of_its_topics(broker, cli, cli_json, stream_path):
    cli("stream", "create", stream_path, "--cleanup-policy", "compact")
    assert block_values(cli("stream", "info", stream_path))["Cleanup policy"] == "compact"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = f"{stream_path}:changelog"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    resource = ConfigResource(ResourceType.TOPIC, name)
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == "compact"
    # ...so a record without a key is refused there, as on a compacted Kafka topic
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce(name, b"no key", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert [e and e.code() for e in errors] == [KafkaError.INVALID_RECORD]

    cli("stream", "edit", stream_path, "--cleanup-policy", "compact,delete")
    assert cli_json("stream", "info", stream_path)["cleanup_policy"] == "compact,delete"
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == "compact,delete"
