"""Differential tests with the other stock clients, alone and mixed.

Each client family (Java kafka-clients, librdkafka, kcat, kafka-python,
aiokafka, kafkajs) runs the same steps against Apache Kafka 4.1.0 and
kafkacompat, and what it reports must agree; then one family produces and
another consumes, on each broker, and the consumer must see the same
records, offsets and headers on both. Skipped with the reason when Kafka
4.1.0 is not on this machine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from .conftest import client_params, driver_for
from .drivers import NotApplicable
from .reference import Side, agree, on_both, unique
from .scenario_data import Received, expected, headers, key_values

pytestmark = pytest.mark.differential


def plain(records: list[Received]) -> list[Received]:
    """Records without their timestamps (wall clock, different on each broker)."""
    return [dataclasses.replace(r, timestamp=-1) for r in records]


def attempt(call: Any, *args: Any) -> Any:
    """A driver call's answer, or the reason the client cannot do it at all."""
    try:
        return call(*args)
    except NotApplicable as exc:
        return f"not applicable: {exc}"


@pytest.mark.parametrize("client_name", client_params())
def test_client_sees_the_same_on_both_brokers(client_name: str, sides: dict[str, Side]) -> None:
    topic, created, group = unique("client"), unique("client-admin"), unique("client-group")

    def script(side: Side) -> dict[str, Any]:
        client = driver_for(client_name, side.bootstrap)
        run: dict[str, Any] = {}
        run["produce"] = client.produce(topic, 6, compression="lz4")
        run["consume"] = plain(client.consume(topic, 6))
        run["group consume"] = key_values(client.group_consume(topic, group, 4)[:4])
        described = side.step("kafka-consumer-groups", "--describe", "--group", group)
        run["committed"] = [row.split()[:6] for row in described.out.splitlines() if row.startswith(group)]
        run["create and describe"] = attempt(client.create_describe_topic, created, 3)
        return run

    runs = on_both(sides, script)
    assert key_values(runs["kafka"]["consume"]) == expected("", 6)
    agree(runs, "produce", "consume", "group consume", "committed", "create and describe")


# (producer family, consumer family, codec): every family on each end at least once
MIXED = [
    ("java", "kafka_python", "gzip"),
    ("kafka_python", "kafkajs", "snappy"),
    ("kafkajs", "librdkafka", None),
    ("librdkafka", "aiokafka", "zstd"),
    ("aiokafka", "kcat", "lz4"),
    ("kcat", "java", "zstd"),
]


@pytest.mark.parametrize(("producer", "consumer", "codec"), MIXED, ids=[f"{p}-to-{c}" for p, c, _ in MIXED])
def test_one_family_produces_another_consumes(
    producer: str, consumer: str, codec: str | None, sides: dict[str, Side],
) -> None:
    topic = unique("mixed")

    def script(side: Side) -> dict[str, Any]:
        driver_for(producer, side.bootstrap).produce(topic, 12, compression=codec)
        return {"consumed": plain(driver_for(consumer, side.bootstrap).consume(topic, 12))}

    runs = on_both(sides, script)
    got = runs["kafkacompat"]["consumed"]
    assert key_values(got) == expected("", 12)
    assert [r.headers for r in got] == [headers(i) for i in range(12)]
    agree(runs, "consumed")


CONSOLE_LINES = "".join(f"src:compat,trace:0af7651916cd43dd8448eb211c80319c\tk{i}\tv{i}\n" for i in range(5))


@pytest.mark.parametrize("consumer", ["librdkafka", "kafka_python"])
def test_kafka_console_producer_to_clients(consumer: str, sides: dict[str, Side]) -> None:
    """Records typed into kafka-console-producer (keys, headers) as other clients read them."""
    topic = unique("console-mixed")

    def script(side: Side) -> dict[str, Any]:
        side.step("kafka-topics", "--create", "--topic", topic, "--partitions", "1")
        produced = side.step("kafka-console-producer", "--topic", topic, "--property", "parse.key=true",
                             "--property", "parse.headers=true", stdin=CONSOLE_LINES)
        return {"produced": produced, "consumed": plain(driver_for(consumer, side.bootstrap).consume(topic, 5))}

    runs = on_both(sides, script)
    assert key_values(runs["kafkacompat"]["consumed"]) == expected("", 5)
    agree(runs, "produced", "consumed")


@pytest.mark.parametrize("producer", ["librdkafka", "aiokafka"])
def test_clients_to_kafka_console_consumer(producer: str, sides: dict[str, Side]) -> None:
    """What other clients wrote as kafka-console-consumer prints it."""
    topic = unique("console-mixed")

    def script(side: Side) -> dict[str, Any]:
        driver_for(producer, side.bootstrap).produce(topic, 5, compression="gzip")
        return {"printed": side.step(
            "kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "5",
            "--timeout-ms", "20000", "--property", "print.key=true", "--property", "print.headers=true",
            "--property", "print.offset=true")}

    runs = on_both(sides, script)
    assert runs["kafkacompat"]["printed"].out.count("compat") == 5
    agree(runs, "printed")

