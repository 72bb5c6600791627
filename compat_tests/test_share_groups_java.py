"""Share groups (KIP-932) with the Java 4.1 KafkaShareConsumer: kafkacompat shows what Kafka 4.1 shows.

compat_tests/java/ShareGroups.java drives each scenario as a user would
(two members splitting a partition's records, explicit ACCEPT/RELEASE/REJECT,
the delivery count limit, a member that stalls until its acquisition lock
times out, a member whose process dies) and prints what the consumers saw:
values, offsets and delivery counts. The same program runs against Apache
Kafka 4.1 (share.version=1) and kafkacompat, both with a 3 s record lock,
and the outputs must be equal; each output is also checked for what it
must mean, so the test stands without the reference broker too.
"""

from __future__ import annotations

import functools
import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

from .conftest import compat_broker
from .drivers.java import JVM_FLAGS, SOURCES, compile_sources
from .reference import KAFKA_DIST, ReferenceKafka, jars_dir, kafka_home

LOCK_MS = 3000  # ShareGroups.java's LOCK_MS
CLIENT_JARS_41 = ("kafka-clients-4.1.0.jar", "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar",
                  "zstd-jni-1.5.6-10.jar", "slf4j-api-1.7.36.jar")


@functools.cache
def _program() -> list[str]:
    """`java ... ShareGroups` compiled against kafka-clients 4.1.0 (KafkaShareConsumer is 4.x only)."""
    libs = kafka_home() / "libs"  # skips without the Kafka 4.1 distribution
    cp = ":".join(str(libs / jar) for jar in CLIENT_JARS_41)
    classes = compile_sources([str(SOURCES / name) for name in ("ShareGroups.java", "TestProgram.java")], cp)
    return ["java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", "ShareGroups"]


def run(command: str, bootstrap: str, **options: str) -> dict:
    argv = [*_program(), command, bootstrap, *(f"{k}={v}" for k, v in options.items())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=150, check=False)
    lines = [line for line in done.stdout.strip().splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"{command} on {bootstrap} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def kafka() -> Iterator[str | None]:
    """Kafka 4.1 with share groups on (share.version=1) and a short record lock, or None."""
    folder = jars_dir()
    if folder is None or not (folder / KAFKA_DIST / "libs").is_dir():
        yield None
        return
    settings = {"group.initial.rebalance.delay.ms": 0, "group.share.min.record.lock.duration.ms": 1000,
                "group.share.record.lock.duration.ms": LOCK_MS}
    with ReferenceKafka(kafka_home(), features={"share.version": 1}, **settings) as reference:
        yield reference.bootstrap_servers


@pytest.fixture(scope="module")
def ours() -> Iterator[Broker]:
    with compat_broker(group_share_record_lock_duration_ms=LOCK_MS) as broker:
        yield broker


def _split(out: dict) -> None:
    assert out["records"] == [f"v{i}@{i}#1" for i in range(20)]  # each once, first delivery
    assert out["total"] == 20 and out["both_got_some"]


def _acks(out: dict) -> None:
    assert out["first"] == ["v0@0#1", "v1@1#1", "v2@2#1"] and out["commit"] == ["ok"]
    assert out["redelivered"] == ["v1@1#2"]  # released: back once more; rejected v2 never


def _limit(out: dict) -> None:
    assert out["deliveries"] == [f"v0@0#{n}" for n in range(1, 6)]  # group.share.delivery.count.limit=5


def _stalled(out: dict) -> None:
    assert out["held"] == ["v0@0#1", "v1@1#1", "v2@2#1"]
    assert out["redelivered"] == ["v0@0#2", "v1@1#2", "v2@2#2"] and out["after_lock_timeout"]


SCENARIOS = {
    "split": ({"records": "20"}, _split),
    "acks": ({}, _acks),
    "limit": ({"records": "1"}, _limit),
    "stalled": ({}, _stalled),
}


@pytest.mark.java
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_share_consumer_same_as_kafka(kafka: str | None, ours: Broker, scenario: str) -> None:
    name = f"share-{scenario}-{uuid.uuid4().hex[:8]}"
    extra, check = SCENARIOS[scenario]
    mine = run(scenario, ours.bootstrap_servers, topic=name, group=name, **extra)
    check(mine)
    if kafka is not None:
        assert mine == run(scenario, kafka, topic=name, group=name, **extra)


def _killed(bootstrap: str) -> tuple[dict, dict]:
    name = f"share-killed-{uuid.uuid4().hex[:8]}"
    held = run("hold", bootstrap, topic=name, group=name)
    return held, run("drain", bootstrap, topic=name, group=name)


@pytest.mark.java
def test_killed_member_gives_records_back(kafka: str | None, ours: Broker) -> None:
    """A consumer process that dies holding records: its connection closes, its share session ends
    and another member gets the records at once, their delivery count taken back (as Kafka does)."""
    held, drained = _killed(ours.bootstrap_servers)
    assert held["held"] == ["v0@0#1", "v1@1#1", "v2@2#1"]
    assert drained["drained"] == ["v0@0#1", "v1@1#1", "v2@2#1"]
    if kafka is not None:
        assert (held, drained) == _killed(kafka)


@pytest.mark.java
def test_acknowledged_progress_survives_restart(tmp_path: object) -> None:
    """Accepted and rejected records stay done after a restart; later records come next."""
    name = f"share-restart-{uuid.uuid4().hex[:8]}"
    data_dir = str(tmp_path)
    with compat_broker(data_dir=data_dir, group_share_record_lock_duration_ms=LOCK_MS) as broker:
        _acks(run("acks", broker.bootstrap_servers, topic=name, group=name))
        broker.produce(name, b"v3", partition=0)
    with compat_broker(data_dir=data_dir, group_share_record_lock_duration_ms=LOCK_MS) as broker:
        assert run("drain", broker.bootstrap_servers, topic=name, group=name, records="1") == {"drained": ["v3@3#1"]}
