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
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make

from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

from .conftest import compat_broker
from .drivers import ClientUnavailable
from .drivers.java import JVM_FLAGS, compile_sources
from .reference import kafka_home, run_tool

pytestmark = pytest.mark.java
SOURCE = Path(__file__).resolve().parent / "streams" / "WordCountEos.java"
STREAMS_JARS = ("kafka-streams-4.1.0.jar", "kafka-clients-4.1.0.jar", "slf4j-api-1.7.36.jar",
                "lz4-java-1.8.0.jar", "snappy-java-1.1.10.7.jar", "zstd-jni-1.5.6-10.jar")
WORDS = ("kafka", "stream", "broker", "partition", "offset", "marker", "commit", "abort", "fence", "epoch")
PARTITIONS = 3
# A killed instance's tasks move once its session times out: Kafka's default 45 s (classic members' own
# session.timeout.ms; for a streams group the broker's, which kafkacompat takes from
# group_streams_session_timeout_ms) would be most of each test's run; 6 s is the smallest a broker
# accepts (group.min.session.timeout.ms), and no test here is about the wait itself.
SESSION_MS = 6000


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
    # Streams groups keep one standby copy of each task (Kafka's group.streams.num.standby.replicas).
    with compat_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
                       group_streams_num_standby_replicas=1, group_streams_session_timeout_ms=SESSION_MS,
                       group_streams_heartbeat_interval_ms=SESSION_MS // 6) as running:
        yield running


def _line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(1 + i % 4))


class _App:
    """The Streams app as a subprocess; started again on the same state dir after a kill."""

    def __init__(self, bootstrap: str, options: dict[str, str]) -> None:
        self.argv = [*_command(), bootstrap, *(f"{k}={v}" for k, v in options.items())]
        self.proc: subprocess.Popen[str] | None = None
        self.running = threading.Event()
        self.active: set[str] = set()  # the active task ids the app last printed

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "RUNNING":
                self.running.set()
            elif line.startswith("ACTIVE"):
                self.active = set(filter(None, line.split(" ", 1)[1].strip().split(",")))

    def wait_running(self, timeout: float = 90) -> None:
        if not self.running.wait(timeout):
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


class _WordCount:
    """The topics, options and input of one word-count application, with the counts the input calls for."""

    def __init__(self, broker: Broker, group_protocol: str) -> None:
        self.bootstrap = broker.bootstrap_servers
        name = f"wc-{uuid.uuid4().hex[:8]}"
        self.source, self.sink = f"{name}-lines", f"{name}-counts"
        broker.create_topic(self.source, partitions=PARTITIONS)
        broker.create_topic(self.sink, partitions=PARTITIONS)
        self.options = {"app": name, "input": self.source, "output": self.sink, "group_protocol": group_protocol}
        if group_protocol == "classic":
            self.options["session_timeout_ms"] = str(SESSION_MS)
        try:  # changelogs are compacted topics; without compaction (an older broker) they may use delete
            broker.create_topic(f"{name}-probe", partitions=1, configs={"cleanup.policy": "compact"})
        except Exception:  # noqa: BLE001 - the broker refused compact
            self.options["changelog_policy"] = "delete"
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        self.expected: collections.Counter[str] = collections.Counter()

    def send(self, first: int, last: int) -> None:
        for i in range(first, last):
            line = _line(i)
            self.producer.produce(self.source, key=str(i).encode(), value=line.encode(), partition=i % PARTITIONS)
            self.expected.update(w for w in re.split(r"[^a-z0-9_]+", line) if w)
        assert self.producer.flush(20) == 0

    def app(self, state_dir: str) -> _App:
        return _App(self.bootstrap, {**self.options, "state_dir": state_dir})

    def assert_exact(self, timeout: float) -> None:
        assert _wait_counts(self.bootstrap, self.sink, dict(self.expected), timeout) == dict(self.expected)


@pytest.mark.parametrize("group_protocol", ["classic", "streams"])
def test_kafka_streams_exactly_once_v2_word_count_across_kill_and_restart(broker: Broker, group_protocol: str) -> None:
    """group.protocol=streams is KIP-1071: the broker assigns tasks and creates the internal topics."""
    wc = _WordCount(broker, group_protocol)
    state_dir = tempfile.mkdtemp(prefix="kafkacompat-streams-")
    app = wc.app(state_dir)
    try:
        wc.send(0, 300)
        app.start()
        app.wait_running()
        wc.assert_exact(90)
        # Kill -9 while the app is busy with a second burst.
        wc.send(300, 1300)
        time.sleep(1.0)
        app.kill()
        wc.send(1300, 1600)
        app = wc.app(state_dir)
        app.start()
        app.wait_running()
        wc.send(1600, 1800)
        wc.assert_exact(120)
    finally:
        app.kill()
        shutil.rmtree(state_dir, ignore_errors=True)


def _wait_split(first: _App, second: _App, timeout: float) -> None:
    """Until both instances hold active tasks, none twice, all 2 x PARTITIONS between them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a, b = set(first.active), set(second.active)
        if a and b and not (a & b) and len(a | b) == 2 * PARTITIONS:
            return
        time.sleep(0.2)
    raise AssertionError(f"tasks not split between the instances: {sorted(first.active)} / {sorted(second.active)}")


def _check_described(bootstrap: str, group: str, actives: list[set[str]]) -> None:
    """kafka-groups --list shows the group as type Streams; StreamsGroupDescribe (what Admin.describeStreamsGroups
    and kafka-streams-groups --describe read) shows its two members, each with the active tasks the instance itself
    reports and a standby copy of the other's."""
    listed = run_tool("kafka-groups", "--bootstrap-server", bootstrap, "--list")
    assert re.search(rf"^{group}\s+Streams\s+streams\s*$", listed.stdout, re.M), listed.stdout + listed.stderr
    request = make(request_class(89, 0), group_ids=(group,), include_authorized_operations=False)
    with Wire(bootstrap) as wire:
        (described,) = wire.request(89, 0, request).groups
    assert described.group_state == "Stable" and len(described.members) == 2

    def tasks(ids: Any) -> list[str]:
        return sorted(f"{t.subtopology_id}_{p}" for t in ids for p in t.partitions)

    shown = [(tasks(m.assignment.active_tasks), tasks(m.assignment.standby_tasks)) for m in described.members]
    assert sorted(active for active, _ in shown) == sorted(sorted(a) for a in actives)
    assert shown[0][1] == shown[1][0] and shown[1][1] == shown[0][0]


@pytest.mark.slow
@pytest.mark.parametrize("group_protocol", ["classic", "streams"])
def test_kafka_streams_second_instance_shares_the_tasks_then_takes_over(broker: Broker, group_protocol: str) -> None:
    """A second instance joins a running one: the tasks are split (each active task on one instance only),
    counts stay exact while both process; once the first is killed -9, the second takes all its tasks over."""
    wc = _WordCount(broker, group_protocol)
    dirs = [tempfile.mkdtemp(prefix="kafkacompat-streams-") for _ in range(2)]
    first, second = wc.app(dirs[0]), wc.app(dirs[1])
    try:
        wc.send(0, 300)
        first.start()
        first.wait_running()
        wc.assert_exact(90)
        second.start()
        second.wait_running()
        _wait_split(first, second, 90)
        if group_protocol == "streams":
            _check_described(wc.bootstrap, wc.options["app"], [first.active, second.active])
        wc.send(300, 900)
        wc.assert_exact(90)
        first.kill()
        wc.send(900, 1200)
        wc.assert_exact(150)
        assert len(second.active) == 2 * PARTITIONS
    finally:
        for app in (first, second):
            app.kill()
        for state_dir in dirs:
            shutil.rmtree(state_dir, ignore_errors=True)


def _group_state(bootstrap: str, group: str, timeout: float = 30) -> tuple[int, dict[str, Any]]:
    """StreamsGroupDescribe once the group is Stable: (group epoch, member id -> (member epoch, active tasks,
    standby tasks))."""
    request = make(request_class(89, 0), group_ids=(group,), include_authorized_operations=False)
    deadline = time.monotonic() + timeout
    with Wire(bootstrap) as wire:
        (described,) = wire.request(89, 0, request).groups
        while described.group_state != "Stable" and time.monotonic() < deadline:
            time.sleep(0.2)
            (described,) = wire.request(89, 0, request).groups
    assert described.group_state == "Stable", described

    def tasks(ids: Any) -> list[str]:
        return sorted(f"{t.subtopology_id}_{p}" for t in ids for p in t.partitions)

    return described.group_epoch, {m.member_id: (m.member_epoch, tasks(m.assignment.active_tasks),
                                                 tasks(m.assignment.standby_tasks)) for m in described.members}


@pytest.mark.slow
def test_kafka_streams_group_keeps_its_epoch_and_tasks_across_a_broker_restart(tmp_path: Path) -> None:
    """Two instances with group.protocol=streams while the broker restarts cleanly: the group is in the store,
    so afterwards it shows the same group epoch, members and tasks (nobody rejoined, no task moved, on Kafka too
    a coordinator reloads its streams group records), and the counts stay exact (nothing processed twice)."""
    settings = {"transaction_abort_timed_out_transaction_cleanup_interval_ms": 1000,
                "group_streams_num_standby_replicas": 1}
    brokers = [compat_broker(data_dir=str(tmp_path), **settings).start()]
    wc = _WordCount(brokers[0], "streams")
    dirs = [tempfile.mkdtemp(prefix="kafkacompat-streams-") for _ in range(2)]
    apps = [wc.app(d) for d in dirs]
    try:
        wc.send(0, 300)
        for app in apps:
            app.start()
            app.wait_running()
        _wait_split(*apps, 90)
        wc.assert_exact(90)
        before = _group_state(wc.bootstrap, wc.options["app"])
        actives = [set(app.active) for app in apps]
        port = brokers[0].port
        brokers[0].stop()
        brokers.append(compat_broker(data_dir=str(tmp_path), port=port, **settings).start())
        wc.send(300, 600)
        wc.assert_exact(120)
        assert _group_state(wc.bootstrap, wc.options["app"]) == before
        assert [set(app.active) for app in apps] == actives
    finally:
        for app in apps:
            app.kill()
        brokers[-1].stop()
        for state_dir in dirs:
            shutil.rmtree(state_dir, ignore_errors=True)
