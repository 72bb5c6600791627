"""Each permission the denied-access matrix checks, done as a user of one client family does it.

Every action returns None when the broker allowed it and Kafka's error name
(TOPIC_AUTHORIZATION_FAILED, ...) when it refused, so the matrix compares
families on what their users would see.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

TIMEOUT = 15.0

Action = Callable[[dict[str, str], str, str], str | None]


def _kafka_error(exc: KafkaException) -> str:
    return exc.args[0].name()


# --- confluent-kafka (librdkafka) -------------------------------------------------------

def ck_produce(config: dict[str, str], topic: str, group: str) -> str | None:
    producer = Producer({**config, "message.timeout.ms": int(TIMEOUT * 1000)})
    outcome: list[Any] = []
    producer.produce(topic, b"payload", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT)
    return outcome[0].name() if outcome and outcome[0] is not None else None if outcome else "TIMED_OUT"


def ck_consume(config: dict[str, str], topic: str, group: str) -> str | None:
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            return msg.error().name() if msg.error() else None
        return "TIMED_OUT"
    finally:
        consumer.close()


def _admin_result(client: AdminClient, call: str, *args: Any) -> str | None:
    futures = getattr(client, call)(*args)  # the client must outlive its futures
    try:
        for future in futures.values():
            future.result(TIMEOUT)
    except KafkaException as exc:
        return _kafka_error(exc)
    return None


def ck_create_topic(config: dict[str, str], topic: str, group: str) -> str | None:
    return _admin_result(AdminClient(config), "create_topics", [NewTopic(topic, 1)])


def ck_delete_topic(config: dict[str, str], topic: str, group: str) -> str | None:
    return _admin_result(AdminClient(config), "delete_topics", [topic])


def ck_alter_configs(config: dict[str, str], topic: str, group: str) -> str | None:
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    return _admin_result(AdminClient(config), "incremental_alter_configs", [resource])


def ck_describe_group(config: dict[str, str], topic: str, group: str) -> str | None:
    return _admin_result(AdminClient(config), "describe_consumer_groups", [group])


def ck_commit(config: dict[str, str], topic: str, group: str) -> str | None:
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False})
    try:
        done = consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    except KafkaException as exc:
        return _kafka_error(exc)
    finally:
        consumer.close()
    errors = [tp.error.name() for tp in done or () if tp.error is not None]
    return errors[0] if errors else None


CONFLUENT: dict[str, Action] = {
    "produce": ck_produce, "consume": ck_consume, "create topic": ck_create_topic, "delete topic": ck_delete_topic,
    "alter configs": ck_alter_configs, "describe group": ck_describe_group, "commit": ck_commit,
}


# --- kafka-python ----------------------------------------------------------------------

def kp_config(config: dict[str, str]) -> dict[str, Any]:
    return {"bootstrap_servers": config["bootstrap.servers"], "security_protocol": config["security.protocol"],
            "sasl_mechanism": config["sasl.mechanism"], "sasl_plain_username": config["sasl.username"],
            "sasl_plain_password": config["sasl.password"], "request_timeout_ms": int(TIMEOUT * 1000)}


def _kp_error(exc: Exception) -> str:
    """Kafka's name of a kafka-python error (its classes carry it as `message`)."""
    return getattr(type(exc), "message", type(exc).__name__)


def _kp(action: Callable[[dict[str, Any], str, str], None]) -> Action:
    def run(config: dict[str, str], topic: str, group: str) -> str | None:
        import kafka.errors

        try:
            action(kp_config(config), topic, group)
        except kafka.errors.KafkaError as exc:
            return _kp_error(exc)
        return None
    return run


def _kp_produce(config: dict[str, Any], topic: str, group: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(**config, max_block_ms=int(TIMEOUT * 1000))
    try:
        producer.send(topic, b"payload").get(TIMEOUT)
    finally:
        producer.close(timeout=5)


def _kp_consume(config: dict[str, Any], topic: str, group: str) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, **config, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if any(consumer.poll(timeout_ms=500).values()):
                return
        raise TimeoutError("nothing consumed")
    finally:
        consumer.close()


def _kp_admin(config: dict[str, Any]) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(**config)


def _kp_create_topic(config: dict[str, Any], topic: str, group: str) -> None:
    from kafka.admin import NewTopic as KpNewTopic

    admin = _kp_admin(config)
    try:
        admin.create_topics([KpNewTopic(topic, 1, 1)])
    finally:
        admin.close()


def _kp_delete_topic(config: dict[str, Any], topic: str, group: str) -> None:
    admin = _kp_admin(config)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()


def _kp_alter_configs(config: dict[str, Any], topic: str, group: str) -> None:
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType

    admin = _kp_admin(config)
    try:
        result = admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic,
                                                       configs={"retention.ms": "3600000"})])
    finally:
        admin.close()
    _raise_reported(result["topic"][topic])


def _raise_reported(outcome: Any) -> None:
    """kafka-python's alter_configs reports each resource's error as text ('[Error 29] ...'): raise it."""
    import kafka.errors

    found = re.match(r"\[Error (\d+)\]", str(outcome or ""))
    if found:
        raise kafka.errors.for_code(int(found.group(1)))()


def _kp_describe_group(config: dict[str, Any], topic: str, group: str) -> None:
    admin = _kp_admin(config)
    try:
        admin.describe_groups([group])
    finally:
        admin.close()


def _kp_commit(config: dict[str, Any], topic: str, group: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(**config, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({KpTopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()


KAFKA_PYTHON: dict[str, Action] = {
    "produce": _kp(_kp_produce), "consume": _kp(_kp_consume), "create topic": _kp(_kp_create_topic),
    "delete topic": _kp(_kp_delete_topic), "alter configs": _kp(_kp_alter_configs),
    "describe group": _kp(_kp_describe_group), "commit": _kp(_kp_commit),
}

FAMILIES = {"confluent-kafka": CONFLUENT, "kafka-python": KAFKA_PYTHON}
