"""`kafkacompat bench scale`: what many topics, connections and cursors cost one broker (issue 32).

An IoT deployment puts tens of thousands of topics, thousands of idle
device connections and as many committed cursors on one broker; what that
costs is not seen in the throughput rows of `kafkacompat bench`. This
starts a real broker process on the disk engine, as a user runs it, and
measures it through the Kafka protocol only:

- topics created through CreateTopics in batches (one partition each,
  spread over several streams), the create rate per tenth of them: a rate
  that falls as topics accumulate means a create costs more than O(1);
- the broker's RSS, Metadata for one topic (p50/p99), Metadata for all
  topics and DescribeTopicPartitions paged to the end, while a steady
  producer and consumer on other connections record their p99: a request
  for everything must not stall everyone else;
- idle connections (ApiVersions answered, then silent): RSS per connection;
  with `--workers N` the broker is `serve --workers N`, the connections go
  round its workers' ports and RSS is the sum over its processes (one
  process holds at most its open-file limit of connections);
- committed cursors: OffsetCommit and OffsetFetch rates, bytes on disk;
- clean stop, clean start and start after kill -9 (with records just
  written to WRITTEN_BEFORE_KILL topics), each to the first answered
  Metadata; then Metadata for all topics, and a record to each written
  topic (each first touch recovers its partition's tail), with what a
  one-topic Metadata on another connection waits meanwhile.

`--engine kafka` measures Apache Kafka 4.1 (one KRaft node, its default
heap) the same way, so the figures have a peer on the same machine; Kafka
has no streams, so its topics are plain names. Where Kafka cannot go (its
open-file or memory-map limits), the bench says after how many topics
CreateTopics failed and prints the end of Kafka's log.

Figures are wall-clock on whatever machine runs it: on a shared machine
quote them with its load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.serial import entity_reader

from kafkacompat.protocol.messages import encode_body, make, request_schema, response_schema
from kafkacompat.protocol.versions import is_flexible

from ..admin.client import AdminClient as PrivateAdmin
from ..frames import read_frame
from ..kafka_port.file_limit import FILES_BESIDE_CONNECTIONS, allow_open_files
from ..testing.ports import free_port_run
from ..testing.reference_kafka import ReferenceKafka, unavailable
from ..testing.services import Postgres, S3Server
from .brokers import KafkacompatBroker
from .idle_clients import IdleConnections
from .procstats import process_tree, rss_mb, send_signal, tree_rss_mb, wait_gone
from .workloads import percentile

METADATA, API_VERSIONS, DESCRIBE_TOPIC_PARTITIONS = 3, 18, 75
STREAM_ROOT = "/scale"
STEADY_TOPIC = "scale-steady"
RESTART_TIMEOUT_S = 600.0
WRITTEN_BEFORE_KILL = 2000  # topics written to before the kill -9, whose first touch after it recovers them


class _Wire:
    """One Kafka connection speaking exact request versions (a client library picks its own)."""

    def __init__(self, bootstrap: str, timeout: float = 120.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: Any) -> None:
        self._correlation += 1
        head = struct.pack(">hhih", api_key, version, self._correlation, 5) + b"scale"
        if is_flexible(api_key, version):
            head += b"\x00"
        payload = head + encode_body(body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive_raw(self) -> bytes:
        return read_frame(self.sock, 1 << 30)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        frame = self.receive_raw()
        pos = 4 + (1 if api_key != API_VERSIONS and is_flexible(api_key, version) else 0)
        return entity_reader(response_schema(api_key, version))(frame, pos)[0]


def _metadata(topics: list[str] | None) -> Any:
    m = request_schema(METADATA, 12)
    wanted = None if topics is None else tuple(
        make(_nested(m, "MetadataRequestTopic"), topic_id=None, name=name) for name in topics)
    return make(m, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _nested(schema: type, name: str) -> type:
    return getattr(sys.modules[schema.__module__], name)


class _ScaleBroker(KafkacompatBroker):
    """The bench's broker, whose store outlives restarts (stop() at the end removes it).

    With `store_args` (--store and --object-store) it runs the cloud engine, its data dir unused; else
    the disk engine in its data dir."""

    ready_timeout_s = RESTART_TIMEOUT_S
    partitions_needed = 0  # past the default max_broker_partitions (100,000), the limit is raised to it
    connections_needed = 0  # per process: past the default max_connections (10,000), likewise
    store_args: list[str] = []
    workers = 1  # `serve --workers N`: worker i listens on port + i
    database_bytes: Callable[[], int] | None = None  # the cloud engine's database size

    def _command(self) -> list[str]:
        raised = ["--max-broker-partitions", str(self.partitions_needed)] if self.partitions_needed > 100_000 else []
        if self.connections_needed > 10_000:
            raised += ["--max-connections", str(self.connections_needed)]
        workers = ["--workers", str(self.workers)] if self.workers > 1 else []
        return super()._command() + raised + workers + self.store_args

    def _pick_port(self) -> int:
        return free_port_run(self.workers) if self.workers > 1 else super()._pick_port()

    def _wait_ready(self) -> None:
        """With --workers, until every worker answers on its port (the supervisor listens for them all
        from its start)."""
        super()._wait_ready()
        if self.workers == 1:
            return
        for address in self.bootstraps.split(","):
            wire = _Wire(address, self.ready_timeout_s)
            try:
                wire.request(API_VERSIONS, 0, make(request_schema(API_VERSIONS, 0)))
            finally:
                wire.close()

    def settle(self) -> None:
        """Until the command's RSS has settled: with --workers, the spare worker starts after the others."""
        if self.workers > 1:
            _settled(self.rss_mb)

    @property
    def bootstraps(self) -> str:
        """Every worker's address, comma-separated (the one address of a single process)."""
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.workers))

    def rss_mb(self) -> float:
        """RSS of the command: its process, with `--workers` its supervisor, workers and spare too."""
        assert self.pid is not None
        return tree_rss_mb(self.pid)

    def stored_bytes(self) -> int:
        """Bytes the store holds: its data dir on the disk engine, its PostgreSQL database on the cloud engine."""
        return self.database_bytes() if self.database_bytes is not None else _disk_bytes(self.run_dir)

    def _prepare(self) -> None:
        if self._run_dir is None:
            super()._prepare()

    @property
    def run_dir(self) -> str:
        assert self._run_dir is not None
        return self._run_dir

    def end(self, sig: int) -> float:
        """Send `sig` (SIGTERM: a clean stop; SIGKILL) and the seconds until the process has exited. With
        --workers, SIGTERM goes to the supervisor, which stops its workers, and SIGKILL to every process
        at once, as a crash of the machine would."""
        proc, self._proc = self._proc, None
        assert proc is not None
        others = process_tree(proc.pid)[1:] if sig == signal.SIGKILL else []
        started = time.monotonic()
        proc.send_signal(sig)
        for pid in others:
            send_signal(pid, signal.SIGKILL)
        proc.wait(RESTART_TIMEOUT_S)
        wait_gone(others, RESTART_TIMEOUT_S)
        return time.monotonic() - started

    def start_to_metadata(self, topic: str) -> tuple[float, float]:
        """Start; seconds until it listens, and until Metadata for `topic` names a leader."""
        return _start_to_metadata(self.start, lambda: self.bootstrap, topic)

    def make_streams(self, count: int) -> None:
        """The streams the topics go in, and the steady clients' topic."""
        private = PrivateAdmin(self.bootstrap)
        for i in range(count):
            private.call("stream.create", path=f"{STREAM_ROOT}/s{i}")
        private.call("topic.create", name=STEADY_TOPIC, partitions=1)

    @staticmethod
    def names(topics: int, streams: int) -> list[str]:
        return [f"{STREAM_ROOT}/s{i % streams}:t{i:07d}" for i in range(topics)]


class _KafkaScaleBroker:
    """Apache Kafka 4.1 (one KRaft node, `testing.reference_kafka`) as the bench's peer, with Kafka's
    own default heap (kafka-server-start.sh's 1 GiB) and defaults, its log dir kept across restarts.

    Kafka has no streams: the topics are named `scale-s<i>-t<n>`, as many as asked."""

    partitions_needed = 0  # what Kafka may hold is its own affair: the bench reports where it stopped
    connections_needed = 0

    def __init__(self) -> None:
        self._kafka = ReferenceKafka(heap="-Xmx1G -Xms1G", **{"group.initial.rebalance.delay.ms": 0})
        self._kafka.start_timeout = RESTART_TIMEOUT_S

    def __enter__(self) -> _KafkaScaleBroker:
        self._kafka.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is not None:  # where Kafka stopped: its own words, before its log dir goes
            print(f"Apache Kafka's log ends:\n{self._kafka.log_tail(6000)}", file=sys.stderr)
        self._kafka.stop()

    @property
    def bootstrap(self) -> str:
        return self._kafka.bootstrap_servers

    @property
    def pid(self) -> int | None:
        return self._kafka.pid

    @property
    def bootstraps(self) -> str:
        return self.bootstrap

    def rss_mb(self) -> float:
        assert self.pid is not None
        return rss_mb(self.pid)

    def settle(self) -> None:
        """Nothing to wait for: one process."""

    def stored_bytes(self) -> int:
        assert self._kafka.workdir is not None
        return _disk_bytes(str(self._kafka.workdir / "logs"))

    def end(self, sig: int) -> float:
        return self._kafka.end(sig, RESTART_TIMEOUT_S)

    def start_to_metadata(self, topic: str) -> tuple[float, float]:
        """Start again on the kept log dir; "listening" once Kafka logs "Kafka Server started"."""
        return _start_to_metadata(self._kafka.restart, lambda: self.bootstrap, topic)

    def make_streams(self, count: int) -> None:
        """The steady clients' topic; Kafka has no streams to make."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # kept until the answer: its futures die with it
        admin.create_topics([NewTopic(STEADY_TOPIC, 1, 1)])[STEADY_TOPIC].result(timeout=120)

    @staticmethod
    def names(topics: int, streams: int) -> list[str]:
        return [f"scale-s{i % streams}-t{i:07d}" for i in range(topics)]


def _settled(rss: Callable[[], float], timeout_s: float = 30.0) -> None:
    """Until `rss` stops growing (two samples 0.5 s apart within 1 MiB), or `timeout_s`."""
    deadline, last = time.monotonic() + timeout_s, rss()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss()
        if abs(now - last) < 1.0:
            return
        last = now


def _start_to_metadata(start: Callable[[], object], bootstrap: Callable[[], str], topic: str) -> tuple[float, float]:
    """Start; seconds until it listens, and until Metadata for `topic` names a leader (the
    bootstrap is read after the start: a kafkacompat broker takes a new port each time)."""
    started = time.monotonic()
    start()
    listening = time.monotonic() - started
    _served(bootstrap(), topic)
    return listening, time.monotonic() - started


def _served(bootstrap: str, topic: str) -> None:
    """Ask Metadata for `topic` until it names a leader (a broker just started may answer
    LEADER_NOT_AVAILABLE first)."""
    deadline = time.monotonic() + RESTART_TIMEOUT_S
    wire = _Wire(bootstrap, RESTART_TIMEOUT_S)
    try:
        while True:
            answer = wire.request(METADATA, 12, _metadata([topic])).topics[0]
            if answer.error_code == 0 and answer.partitions and answer.partitions[0].leader_id >= 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} had no leader within {RESTART_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
    finally:
        wire.close()


class _Steady:
    """A producer and a consumer on their own connections, sending every 10 ms while the bench works.

    They run in a process of their own. In the bench's process they shared its interpreter lock
    with the decoding of big answers (each DescribeTopicPartitions page is decoded by kio in Python),
    so a record's latency included waits for the bench's own thread, not only the broker's.
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._samples: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
        self._conn: Any = None
        self._process: Any = None

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")  # the bench has client threads: never fork it
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_steady_clients, args=(self.bootstrap, theirs), daemon=True)
        self._process.start()
        theirs.close()

    def stop(self) -> None:
        if self._process is None:
            return
        self._ask("stop")
        self._process.join(30)
        self._conn.close()
        self._process = self._conn = None

    @property
    def produce_ms(self) -> list[tuple[float, float]]:
        """(sent at, latency) of every acknowledged record so far; time.monotonic is the machine's."""
        if self._process is not None:
            self._ask("samples")
        return self._samples[0]

    @property
    def fetch_ms(self) -> list[tuple[float, float]]:
        """(sent at, from sending to reading it back) of every record read so far."""
        if self._process is not None:
            self._ask("samples")
        return self._samples[1]

    def _ask(self, what: str) -> None:
        self._conn.send(what)
        if not self._conn.poll(60):
            raise RuntimeError("the steady clients' process did not answer within 60 s")
        self._samples = self._conn.recv()

    @staticmethod
    def p99(samples: list[tuple[float, float]], since: float = 0.0, until: float = float("inf")) -> float | None:
        within = sorted(ms for at, ms in samples if since <= at <= until)
        return round(percentile(within, 0.99), 1) if within else None


def _steady_clients(bootstrap: str, conn: Any) -> None:
    """The steady clients' process: their threads run until asked to stop; each question is answered
    with every sample so far."""
    produced: list[tuple[float, float]] = []
    fetched: list[tuple[float, float]] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_steady_produce, args=(bootstrap, produced, stop), daemon=True),
               threading.Thread(target=_steady_consume, args=(bootstrap, fetched, stop), daemon=True)]
    for thread in threads:
        thread.start()
    while True:
        what = conn.recv()
        if what == "stop":
            stop.set()
            for thread in threads:
                thread.join(30)
        conn.send((list(produced), list(fetched)))
        if what == "stop":
            return


def _steady_produce(bootstrap: str, produced: list[tuple[float, float]], stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})

    def delivered(sent: float) -> Callable[[Any, Any], None]:
        def report(err: Any, _msg: Any) -> None:
            if err is None:
                produced.append((sent, (time.monotonic() - sent) * 1000))
        return report

    while not stop.is_set():
        sent = time.monotonic()
        producer.produce(STEADY_TOPIC, struct.pack(">d", sent), on_delivery=delivered(sent))
        producer.poll(0.01)
    producer.flush(30)


def _steady_consume(bootstrap: str, fetched: list[tuple[float, float]], stop: threading.Event) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-steady",
                         "auto.offset.reset": "latest", "fetch.wait.max.ms": 10, "enable.auto.commit": False})
    consumer.assign([TopicPartition(STEADY_TOPIC, 0, -1)])  # from the end: what is produced from now
    while not stop.is_set():
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None and len(msg.value()) == 8:
            sent = struct.unpack(">d", msg.value())[0]
            fetched.append((sent, (time.monotonic() - sent) * 1000))
    consumer.close()


def _create(bootstrap: str, names: list[str], out: dict[str, Any]) -> None:
    """CreateTopics in batches of up to 1,000; the create rate in each tenth of the topics (those
    reached, when a request fails: where a broker stops is a figure too)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    batch = max(1, min(1000, len(names) // 10))
    done_at: list[tuple[int, float]] = []
    started = time.monotonic()
    for first in range(0, len(names), batch):
        chunk = names[first:first + batch]
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in chunk], request_timeout=600)
        try:
            for future in futures.values():
                future.result(timeout=600)
        except KafkaException as exc:
            out["create_topics_per_s_by_tenth"] = _rates_by_tenth(len(names), done_at)
            raise RuntimeError(f"CreateTopics failed after {first:,} topics were created "
                               f"({time.monotonic() - started:.0f} s into the creation): {exc}") from exc
        done_at.append((first + len(chunk), time.monotonic() - started))
    # Kafka answers CreateTopics once its controller has the records; its broker makes the logs after
    _served(bootstrap, names[-1])
    out["served_after_last_create_s"] = round(time.monotonic() - started - done_at[-1][1], 1)
    out["create_topics_per_s_by_tenth"] = _rates_by_tenth(len(names), done_at)  # as CreateTopics answered
    out["create_s"] = round(done_at[-1][1] + out["served_after_last_create_s"], 1)  # until the last is served


def _rates_by_tenth(total: int, done_at: list[tuple[int, float]]) -> list[int]:
    """Topics a second in each tenth of `total` reached, from (topics created, seconds) after each request."""
    rates, last_n, last_t = [], 0, 0.0
    for tenth in range(1, 11):
        bound = total * tenth // 10
        n, t = next(((n, t) for n, t in done_at if n >= bound), (0, 0.0))
        if n > last_n:
            rates.append(round((n - last_n) / max(t - last_t, 1e-9)))
            last_n, last_t = n, t
    return rates


def _timed(fn: Callable[[], Any]) -> float:
    started = time.monotonic()
    fn()
    return (time.monotonic() - started) * 1000


def _metadata_figures(bootstrap: str, names: list[str], steady: _Steady, out: dict[str, Any]) -> None:
    wire = _Wire(bootstrap)
    try:
        one = sorted(_timed(lambda i=i: wire.request(METADATA, 12, _metadata([names[i * 7919 % len(names)]])))
                     for i in range(300))
        out["metadata_one_topic_ms"] = {"p50": round(percentile(one, 0.5), 2), "p99": round(percentile(one, 0.99), 2)}
        since = time.monotonic()
        every = []
        for _ in range(3):  # timed to the last byte received; the client's decoding is not the broker's
            every.append(_timed(lambda: (wire.send(METADATA, 12, _metadata(None)), wire.receive_raw())))
        out["metadata_all_topics_ms"] = [round(ms) for ms in every]
        pages, started = _describe_all(wire)
        out["describe_topic_partitions_all_ms"] = round((time.monotonic() - started) * 1000)
        out["describe_topic_partitions_pages"] = pages
        until = time.monotonic()
    finally:
        wire.close()
    out["steady_during_big_requests_p99_ms"] = {"produce": steady.p99(steady.produce_ms, since, until),
                                                "produce_to_fetch": steady.p99(steady.fetch_ms, since, until)}


def _describe_all(wire: _Wire) -> tuple[int, float]:
    """DescribeTopicPartitions for all topics, page after page as Java's admin client asks: (pages, start)."""
    m = request_schema(DESCRIBE_TOPIC_PARTITIONS, 0)
    cursor, pages, started = None, 0, time.monotonic()
    while True:
        answer = wire.request(DESCRIBE_TOPIC_PARTITIONS, 0,
                              make(m, topics=(), response_partition_limit=2000, cursor=cursor))
        pages += 1
        if answer.next_cursor is None:
            return pages, started
        cursor = make(_nested(m, "Cursor"), topic_name=answer.next_cursor.topic_name,
                      partition_index=answer.next_cursor.partition_index)


def _idle_connections(broker: _ScaleBroker | _KafkaScaleBroker, count: int, out: dict[str, Any]) -> None:
    """`count` idle connections (idle_clients.py), round every worker's port: their RSS, and a steady
    producer's p99 before they open, while they open and while they are held, in windows of equal length."""
    window = min(10.0, 1.0 + count / 2_000)
    steady = _Steady(broker.bootstrap)
    steady.start()
    try:
        time.sleep(window)  # the steady clients' figures without the idle connections
        before, opening = broker.rss_mb(), time.monotonic()
        with IdleConnections(broker.bootstraps, count):
            held = time.monotonic()
            time.sleep(window)  # at least a second: receive buffers are handed back after one (kafka_port/receive.py)
            grown = broker.rss_mb() - before
            out["rss_with_idle_connections_mb"] = round(broker.rss_mb(), 1)
            released = time.monotonic()
        out["idle_connections_close_s"] = round(time.monotonic() - released, 1)
    finally:
        steady.stop()
    out["idle_connections"] = count
    out["idle_connections_open_s"] = round(held - opening, 1)
    out["rss_per_idle_connection_kb"] = round(grown * 1024 / count, 2) if count else None
    out["steady_p99_ms_idle_connections"] = {
        name: {"produce": steady.p99(steady.produce_ms, since, until),
               "produce_to_fetch": steady.p99(steady.fetch_ms, since, until)}
        for name, since, until in (("before", opening - window, opening), ("opening", opening, held),
                                   ("held", held, released))}


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for first in range(0, len(items), size):
        yield items[first:first + size]


def _disk_bytes(root: str) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _cursors(broker: _ScaleBroker | _KafkaScaleBroker, names: list[str], count: int, out: dict[str, Any]) -> None:
    """`count` committed cursors: one per (group, topic), groups of len(names) cursors each."""
    wanted = [(f"scale-cursors-{i // len(names)}", names[i % len(names)]) for i in range(count)]
    groups: dict[str, list[TopicPartition]] = {}
    for group, name in wanted:
        groups.setdefault(group, []).append(TopicPartition(name, 0, 1))
    rss0, disk0, started = broker.rss_mb(), broker.stored_bytes(), time.monotonic()
    for group, offsets in groups.items():
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        for chunk in _chunks(offsets, 1000):
            consumer.commit(offsets=chunk, asynchronous=False)
        consumer.close()
    committed = time.monotonic() - started
    started = time.monotonic()
    fetched = 0
    for group, offsets in groups.items():
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        for chunk in _chunks(offsets, 1000):
            fetched += sum(1 for tp in consumer.committed(chunk, timeout=120) if tp.offset == 1)
        consumer.close()
    out["cursors"] = count
    out["cursors_fetched_back"] = fetched
    out["offset_commit_per_s"] = round(count / committed) if count else None
    out["offset_fetch_per_s"] = round(count / (time.monotonic() - started)) if count else None
    time.sleep(1.5)  # the disk engine writes cursors behind (fsync interval)
    out["cursor_bytes_on_disk"] = broker.stored_bytes() - disk0
    out["rss_per_cursor_bytes"] = round((broker.rss_mb() - rss0) * 1024 * 1024 / count) if count else None


def _restarts(broker: _ScaleBroker | _KafkaScaleBroker, names: list[str], out: dict[str, Any]) -> None:
    probe = names[0]
    out["rss_before_stop_mb"] = round(broker.rss_mb(), 1) if broker.pid else None
    out["clean_stop_s"] = round(broker.end(signal.SIGTERM), 2)
    listening, answered = broker.start_to_metadata(probe)
    out["clean_start_s"] = {"listening": round(listening, 2), "first_metadata": round(answered, 2)}
    broker.settle()
    out["rss_after_start_mb"] = round(broker.rss_mb(), 1) if broker.pid else None
    written = names[:WRITTEN_BEFORE_KILL]
    _produce_one_each(broker.bootstrap, written)  # tails the next start has to recover
    broker.end(signal.SIGKILL)
    listening, answered = broker.start_to_metadata(probe)
    out["start_after_kill9_s"] = {"listening": round(listening, 2), "first_metadata": round(answered, 2)}
    took, waits = _all_beside_one(broker.bootstrap, probe, lambda: _request_all(broker.bootstrap))
    out["first_metadata_all_after_kill9_ms"] = round(took)
    out["one_topic_metadata_meanwhile_max_ms"] = round(max(waits), 1) if waits else None
    took, waits = _all_beside_one(broker.bootstrap, probe, lambda: _produce_one_each(broker.bootstrap, written))
    out[f"first_produce_to_{len(written)}_written_topics_after_kill9_ms"] = round(took)
    out["one_topic_metadata_meanwhile_ms"] = {"p99": round(percentile(sorted(waits), 0.99), 1) if waits else None,
                                              "max": round(max(waits), 1) if waits else None}


def _request_all(bootstrap: str) -> None:
    wire = _Wire(bootstrap, RESTART_TIMEOUT_S)
    try:  # to the last byte received; the client's decoding is not the broker's
        wire.send(METADATA, 12, _metadata(None))
        wire.receive_raw()
    finally:
        wire.close()


def _produce_one_each(bootstrap: str, names: list[str]) -> None:
    """A record to each topic, the partitions of many in one Produce request, as a batching producer sends."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": 1})
    for name in names:
        producer.produce(name, b"x")
        producer.poll(0)
    if producer.flush(RESTART_TIMEOUT_S):
        raise RuntimeError(f"records to {len(names)} topics not acknowledged in {RESTART_TIMEOUT_S:.0f} s")


def _all_beside_one(bootstrap: str, topic: str, big: Callable[[], None]) -> tuple[float, list[float]]:
    """`big` (a request for everything, or a burst of first touches) while another connection asks for
    one topic's metadata again and again: ms until `big` was done, and each small request's wait
    (what other clients see)."""
    small = _Wire(bootstrap, RESTART_TIMEOUT_S)
    done = threading.Event()

    def run() -> None:
        try:
            big()
        finally:
            done.set()

    try:
        started = time.monotonic()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        waits = []
        while not done.is_set():
            waits.append(_timed(lambda: small.request(METADATA, 12, _metadata([topic]))))
        thread.join()
        return (time.monotonic() - started) * 1000, waits
    finally:
        small.close()


def measure(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Every figure, on the engine `args.engine` names; the cloud engine's PostgreSQL and S3 endpoint
    (moto) are started here, on this machine, as the tests start them."""
    if args.engine == "kafka":
        _measure(args, _KafkaScaleBroker(), out)
        return
    broker = _ScaleBroker(args.data_dir, args.fsync)
    broker.workers = args.workers
    if args.engine != "cloud":
        _measure(args, broker, out)
        return
    with Postgres() as pg, S3Server() as s3:
        os.environ.update(s3.environ())  # the broker's endpoint and credentials, as users give them
        s3.create_bucket("kafkacompat")
        database = pg.create_database()
        name = database.rsplit("/", 1)[1]
        broker.store_args = ["--store", database, "--object-store", "s3://kafkacompat/scale"]
        broker.database_bytes = lambda: int(pg.sql(f"SELECT pg_database_size('{name}')", name).strip())
        _measure(args, broker, out)


def _measure(args: argparse.Namespace, broker: _ScaleBroker | _KafkaScaleBroker, out: dict[str, Any]) -> None:
    """Fill `out` figure by figure: a broker that fails part-way leaves what was measured before."""
    streams = max(1, min(args.streams, args.topics))
    names = broker.names(args.topics, streams)
    out.update({"engine": args.engine, "workers": args.workers, "topics": args.topics, "streams": streams,
                "load_average_start": os.getloadavg()})
    broker.partitions_needed = args.topics + 1000  # the steady topic and the internal ones too
    broker.connections_needed = _per_process(args) + 100  # the bench's other clients too
    with broker:
        broker.settle()
        out["rss_empty_mb"] = round(broker.rss_mb(), 1)
        broker.make_streams(streams)
        stored_empty = broker.stored_bytes()
        steady = _Steady(broker.bootstrap)
        steady.start()
        try:
            create_from = time.monotonic()
            _create(broker.bootstrap, names, out)
            out["steady_during_create_p99_ms"] = {"produce": steady.p99(steady.produce_ms, create_from),
                                                  "produce_to_fetch": steady.p99(steady.fetch_ms, create_from)}
            out["rss_with_topics_mb"] = round(broker.rss_mb(), 1)
            out["rss_per_topic_kb"] = round((out["rss_with_topics_mb"] - out["rss_empty_mb"]) * 1024 / args.topics, 2)
            out["store_bytes_per_topic"] = round((broker.stored_bytes() - stored_empty) / args.topics)
            _metadata_figures(broker.bootstrap, names, steady, out)
        finally:
            steady.stop()
        out["rss_partitions_opened_mb"] = round(broker.rss_mb(), 1)  # Metadata for all opened every partition
        out["rss_per_opened_topic_kb"] = round(
            (out["rss_partitions_opened_mb"] - out["rss_empty_mb"]) * 1024 / args.topics, 2)
        out["steady_overall_p99_ms"] = {"produce": steady.p99(steady.produce_ms),
                                        "produce_to_fetch": steady.p99(steady.fetch_ms)}
        _idle_connections(broker, args.connections, out)
        _cursors(broker, names, args.cursors, out)
        _restarts(broker, names, out)
    out["load_average_end"] = os.getloadavg()


def _per_process(args: argparse.Namespace) -> int:
    """The idle connections one broker process holds: each worker takes its share."""
    return -(-args.connections // args.workers)


def run(args: argparse.Namespace) -> int:
    if args.engine == "kafka" and unavailable():
        print(f"kafkacompat bench scale: {unavailable()}", file=sys.stderr)
        return 2
    if args.workers > 1 and args.engine != "disk":
        print(f"kafkacompat bench scale: --workers runs the disk engine's `serve --workers N`, not --engine "
              f"{args.engine}", file=sys.stderr)
        return 2
    need = _per_process(args) + FILES_BESIDE_CONNECTIONS
    allowed = allow_open_files(need)  # the broker, started from here, inherits it
    if allowed < need:
        most = max(allowed - FILES_BESIDE_CONNECTIONS, 0) * args.workers
        print(f"kafkacompat bench scale: {args.connections:,} idle connections need an open-file limit of "
              f"{need:,} for each broker process; this machine allows {allowed:,} (ulimit -Hn; raising it needs "
              f"CAP_SYS_RESOURCE): ask for at most {most:,}, or spread them over more --workers", flush=True)
        return 2
    workers = f" over {args.workers} workers" if args.workers > 1 else ""
    print(f"kafkacompat bench scale: {args.topics:,} topics, {args.connections:,} idle connections{workers}, "
          f"{args.cursors:,} cursors; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    out: dict[str, Any] = {}
    try:
        measure(args, out)
    except (OSError, KafkaException, RuntimeError) as exc:
        print(f"kafkacompat bench scale: {exc}", flush=True)
        if not out.get("rss_empty_mb"):
            return 1
        out["stopped"] = str(exc)  # where the broker could go no further: what was measured before it
    for key, value in out.items():
        print(f"  {key}: {value}")
    with open(args.json, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"results in {args.json}")
    return 1 if "stopped" in out else 0
