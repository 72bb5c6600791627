"""Kafka Streams 4.1 word count with exactly_once_v2 gives exact counts across kill -9 and restart.

compat_tests/streams/WordCountEos.java is the quickstart word count with an
in-memory store (its state is rebuilt from the changelog on restart) and
processing.guarantee=exactly_once_v2. Lines go in before, during and after
the app is killed with SIGKILL mid-processing; once restarted, the last
count per word in the output (read_committed) must be exactly the number
of times the word was sent: a lost or replayed record would show.
"""

from __future__ import annotations

import collections
import functools
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkacompat.testing import Broker

from .conftest import compat_broker
from .drivers import ClientUnavailable
from .drivers.java import JVM_FLAGS, compile_sources
from .reference import kafka_home

pytestmark = pytest.mark.java
SOURCE = Path(__file__).resolve().parent / "streams" / "WordCountEos.java"
STREAMS_JARS = ("kafka-streams-4.1.0.jar", "kafka-clients-4.1.0.jar", "slf4j-api-1.7.36.jar",
                "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar", "zstd-jni-1.5.6-10.jar")
WORDS = ("kafka", "stream", "broker", "partition", "offset", "marker", "commit", "abort", "fence", "epoch")
PARTITIONS = 3


@functools.cache
def _command() -> list[str]:
    libs = kafka_home() / "libs"  # skips without the Kafka 4.1 distribution
    missing = [jar for jar in STREAMS_JARS if not (libs / jar).is_file()]
    if missing:
        pytest.skip(f"missing in {libs}: {missing}")
    cp = ":".join(str(libs / jar) for jar in STREAMS_JARS)
    try:
        classes = compile_sources([str(SOURCE)], cp)
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    return ["java", *JVM_FLAGS, "-cp", f"{cp}:{classes}", "WordCountEos"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    # Kafka's own default is 10 s; a killed instance's open transaction is aborted sooner here.
    with compat_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=1000) as running:
        yield running


def _line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(1 + i % 4))


class _App:
    """The Streams app as a subprocess; started again on the same state dir after a kill."""

    def __init__(self, bootstrap: str, options: dict[str, str]) -> None:
        self.argv = [*_command(), bootstrap, *(f"{k}={v}" for k, v in options.items())]
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_running(self, timeout: float = 90) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        ready = threading.Event()

        def watch() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.strip() == "RUNNING":
                    ready.set()
                    return

        threading.Thread(target=watch, daemon=True).start()
        if not ready.wait(timeout):
            self.kill()
            raise AssertionError(f"Streams app not RUNNING within {timeout}s:\n{self._stderr()}")

    def _stderr(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        return self.proc.stderr.read()[-4000:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)


def _counts(bootstrap: str, topic: str) -> dict[str, int]:
    """The last count per word in the output, as a read_committed consumer sees it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latest: dict[str, int] = {}
    ended: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                ended.add(msg.partition())
                continue
            ended.discard(msg.partition())
            latest[msg.key().decode()] = struct.unpack(">q", msg.value())[0]
    finally:
        consumer.close()
    return latest


def _wait_counts(bootstrap: str, topic: str, expected: dict[str, int], timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    seen = _counts(bootstrap, topic)
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = _counts(bootstrap, topic)
    return seen


@pytest.mark.parametrize("group_protocol", ["classic", "streams"])
def test_kafka_streams_exactly_once_v2_word_count_across_kill_and_restart(broker: Broker, group_protocol: str) -> None:
    """group.protocol=streams is KIP-1071: the broker assigns tasks and creates the internal topics."""
    bootstrap = broker.bootstrap_servers
    name = f"wc-{uuid.uuid4().hex[:8]}"
    source, sink = f"{name}-lines", f"{name}-counts"
    broker.create_topic(source, partitions=PARTITIONS)
    broker.create_topic(sink, partitions=PARTITIONS)
    options = {"app": name, "input": source, "output": sink, "group_protocol": group_protocol}
    try:  # changelogs are compacted topics; without compaction (an older broker) they may use delete
        broker.create_topic(f"{name}-probe", partitions=1, configs={"cleanup.policy": "compact"})
    except Exception:  # noqa: BLE001 - the broker refused compact
        options["changelog_policy"] = "delete"
    state_dir = tempfile.mkdtemp(prefix="kafkacompat-streams-")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    expected: collections.Counter[str] = collections.Counter()

    def send(first: int, last: int) -> None:
        for i in range(first, last):
            line = _line(i)
            producer.produce(source, key=str(i).encode(), value=line.encode(), partition=i % PARTITIONS)
            expected.update(w for w in re.split(r"[^a-z0-9_]+", line) if w)
        assert producer.flush(20) == 0

    app = _App(bootstrap, {**options, "state_dir": state_dir})
    try:
        send(0, 300)
        app.start()
        app.wait_running()
        assert _wait_counts(bootstrap, sink, dict(expected), 90) == dict(expected)
        # Kill -9 while the app is busy with a second burst.
        send(300, 1300)
        time.sleep(1.0)
        app.kill()
        send(1300, 1600)
        app = _App(bootstrap, {**options, "state_dir": state_dir})
        app.start()
        app.wait_running()
        send(1600, 1800)
        assert _wait_counts(bootstrap, sink, dict(expected), 120) == dict(expected)
    finally:
        app.kill()
        shutil.rmtree(state_dir, ignore_errors=True)
