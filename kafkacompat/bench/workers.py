"""Worker benchmark: aggregate produce and consume throughput of `serve --workers 1`, `--workers 2` and
Apache Kafka 4.1, side by side (issue 35).

    python -m kafkacompat.bench.workers [--seconds S] [--sizes 100,16384] [--producers 1,2,4]
                                        [--rounds R] [--no-kafka]

One asyncio broker process uses one core; `--workers N` runs N over one
store. Each row: P librdkafka producers (separate processes, acks=1, one
4-partition topic each, so each producer's load is split over the workers),
sending as fast as they can for S seconds, then P consumers (one per topic,
from the start) reading all of it back; printed: aggregate MB/s of each and
the broker's CPU seconds per GB (every process of the command, or Kafka's
JVM). Kafka is one KRaft node from ../shared/jars (testing.reference_kafka,
a 1 GiB heap as kafka-server-start.sh gives it). The machine may be shared
and loaded, so the brokers run side by side: every round runs each (size,
producers) row on each broker in turn, and the ratios per round are printed
with their median. The clients run on the same cores as the brokers: on a
small machine the figures compare brokers, not hardware limits. So each
row also prints the clients' own CPU seconds per GB ("clients") and the
rate at which broker and clients together, at those costs, would use
every core ("bound"): a broker near its bound is held by the machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..testing.reference_kafka import ReferenceKafka, unavailable
from ..workers.supervisor import WORKER_STARTED
from .procstats import cpu_seconds, peak_rss_mb

PARTITIONS = 4
CONSUME_TIMEOUT_S = 300.0  # a consumer that has not read everything by then fails the row
START_TIMEOUT_S = 120.0


class Served:
    """`kafkacompat serve --workers N` on a fresh data dir; its log goes to a file the ports are read from."""

    def __init__(self, workers: int, data_dir: str) -> None:
        self.name = f"workers {workers}"
        self.log_path = os.path.join(data_dir, "serve.log")
        with open(self.log_path, "w") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", os.path.join(data_dir, "store"),
                 "--host", "127.0.0.1", "--port", "0", "--workers", str(workers)],
                stdout=log_file, stderr=subprocess.STDOUT)
        self.ports = self._ports(workers)
        self.pids = [self.proc.pid, *self._worker_pids()]

    def _ports(self, workers: int) -> list[int]:
        pattern = r"workers serving on ports ([\d, ]+)" if workers > 1 else r"listening on \S+://127\.0\.0\.1:(\d+)"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with open(self.log_path) as f:
                found = re.search(pattern, f.read())
            if found:
                return [int(p) for p in found.group(1).split(",")]
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"serve --workers {workers} did not start; see {self.log_path}")

    def _worker_pids(self) -> list[int]:
        with open(self.log_path) as f:
            return [int(found["pid"]) for found in WORKER_STARTED.finditer(f.read())]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            try:
                total += cpu_seconds(pid)
            except OSError:
                pass
        return total

    def rss_per_worker(self) -> float:
        """Mean peak resident MB of the broker processes (the supervisor, when there is one, left out)."""
        brokers = self.pids[1:] or self.pids
        return statistics.mean(peak_rss_mb(pid) for pid in brokers)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Kafka:
    """Apache Kafka 4.1, one KRaft node on a fresh log dir, as the peer."""

    name = "kafka 4.1"

    def __init__(self) -> None:
        self._kafka = ReferenceKafka(heap="-Xmx1G -Xms1G")
        self._kafka.start()
        self.pids = [self._kafka.pid] if self._kafka.pid is not None else []

    @property
    def bootstrap(self) -> str:
        return self._kafka.bootstrap_servers

    @property
    def ports(self) -> list[int]:
        return [int(self.bootstrap.rsplit(":", 1)[1])]

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)

    def rss_per_worker(self) -> float:
        return statistics.mean(peak_rss_mb(pid) for pid in self.pids)

    def stop(self) -> None:
        self._kafka.stop()


class Broker(Protocol):
    name: str
    pids: list[int]

    @property
    def bootstrap(self) -> str: ...

    @property
    def ports(self) -> list[int]: ...

    def cpu(self) -> float: ...

    def rss_per_worker(self) -> float: ...

    def stop(self) -> None: ...


def _produce(bootstrap: str, topic: str, size: int, seconds: float, start_at: float, out) -> None:
    """One producer process: send `size`-byte records for `seconds`, put the bytes delivered in `out`."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 65536, "compression.type": "none"})
    payload = os.urandom(size)
    delivered = [0]

    def on_delivery(err, msg) -> None:
        if err is None:
            delivered[0] += len(payload)

    while time.time() < start_at:
        time.sleep(0.005)
    cpu = time.process_time()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        try:
            producer.produce(topic, payload, partition=n % PARTITIONS, on_delivery=on_delivery)
            n += 1
        except BufferError:
            producer.poll(0.001)
        producer.poll(0)
    counted = delivered[0]  # what was acknowledged within the window
    cpu = time.process_time() - cpu
    producer.flush(30)
    out.put((counted, cpu))


def _consume(bootstrap: str, topic: str, ends: list[int], start_at: float, out) -> None:
    """One consumer process: read the topic's partitions from the start to `ends`; put (bytes, seconds, records
    left, CPU seconds)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    left, read = sum(ends), 0
    while time.time() < start_at:
        time.sleep(0.005)
    started, cpu = time.monotonic(), time.process_time()
    deadline = started + CONSUME_TIMEOUT_S
    while left > 0 and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is None:
                read += len(msg.value())
                left -= 1
    took, cpu = time.monotonic() - started, time.process_time() - cpu
    consumer.close()
    out.put((read, took, left, cpu))


def _in_processes(broker: Broker, target: Callable[..., None], args: list[tuple], timeout: float
                  ) -> tuple[list, float]:
    """Run `target(*each, start_at, queue)` in a process per `args`, all starting at one moment three seconds
    on (every client connected first); their results, and the broker's CPU seconds from that moment until
    the last result came."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 3.0
    procs = [ctx.Process(target=target, args=(*each, start_at, out)) for each in args]
    for proc in procs:
        proc.start()
    while time.time() < start_at:
        time.sleep(0.01)
    before = broker.cpu()
    results = [out.get(timeout=timeout) for _ in procs]
    spent = broker.cpu() - before
    for proc in procs:
        proc.join(60)
    return results, spent


def measure(start: Callable[[str], Broker], producers: int, size: int, seconds: float) -> dict[str, float]:
    """One row: `producers` producers, then as many consumers, against the broker `start` starts in a fresh
    directory: produce and consume MB/s and CPU seconds per GB, peak MB resident per broker process."""
    with tempfile.TemporaryDirectory(prefix="kc-bench-workers-") as data_dir:
        broker = start(data_dir)
        try:
            topics = [f"bench-{i}" for i in range(producers)]
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
            for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
                future.result(30)
            _wait_listed(broker, topics)
            sent_cpu, produce_cpu = _in_processes(broker, _produce, [(broker.bootstrap, t, size, seconds) for t in topics],
                                              seconds + 120)
            ends = [_ends(broker.bootstrap, t) for t in topics]
            read, consume_cpu = _in_processes(broker, _consume, [(broker.bootstrap, t, e) for t, e in zip(topics, ends)],
                                              CONSUME_TIMEOUT_S + 60)
            rss = broker.rss_per_worker()
        finally:
            broker.stop()
    produced, consumed = sum(s[0] for s in sent_cpu), sum(r[0] for r in read)
    if any(r[2] for r in read):
        raise RuntimeError(f"{broker.name}: consumers missed {sum(r[2] for r in read)} records")
    took = max(r[1] for r in read)
    return {"produce": produced / seconds / 1e6, "produce_cpu": _per_gb(produce_cpu, produced),
            "producers_cpu": _per_gb(sum(s[1] for s in sent_cpu), produced),
            "consume": consumed / took / 1e6, "consume_cpu": _per_gb(consume_cpu, consumed),
            "consumers_cpu": _per_gb(sum(r[3] for r in read), consumed), "rss": rss}


def _bound(row: dict[str, float], what: str) -> float:
    """The MB/s at which this broker and its clients (`what`: produce or consume), at the CPU per GB they
    spent, would keep every core of this machine busy: where sharing the cores with the clients stops it."""
    clients = {"produce": "producers_cpu", "consume": "consumers_cpu"}[what]
    return (os.cpu_count() or 1) * 1000 / (row[f"{what}_cpu"] + row[clients])


def _per_gb(cpu: float, count: int) -> float:
    return cpu / (count / 1e9) if count else float("nan")


def _ends(bootstrap: str, topic: str) -> list[int]:
    """Each partition's high watermark: where its consumer stops."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends", "log_level": 0})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def _wait_listed(broker: Broker, topics: list[str]) -> None:
    """Every worker lists the topics (workers other than 0 take in the catalog within a moment)."""
    for port in broker.ports:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
        deadline = time.monotonic() + 30
        while not all(len(admin.list_topics(t, timeout=10).topics[t].partitions) == PARTITIONS for t in topics):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker at port {port} never listed {topics}")
            time.sleep(0.1)


def brokers(with_kafka: bool) -> list[tuple[str, Callable[[str], Broker]]]:
    """The brokers each row runs on, by name."""
    found: list[tuple[str, Callable[[str], Broker]]] = [
        ("workers 1", lambda data_dir: Served(1, data_dir)), ("workers 2", lambda data_dir: Served(2, data_dir))]
    if with_kafka:
        found.append(("kafka 4.1", lambda _data_dir: Kafka()))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="produce window per row (default 8)")
    parser.add_argument("--sizes", default="100,16384", help="record value sizes in bytes, comma-separated")
    parser.add_argument("--producers", default="1,2,4", help="producer counts, comma-separated (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=2, help="times every row runs on each broker, interleaved")
    parser.add_argument("--no-kafka", dest="kafka", action="store_false", help="leave out Apache Kafka 4.1")
    args = parser.parse_args(argv)
    if args.kafka and unavailable():
        print(f"kafkacompat.bench.workers: {unavailable()} (or --no-kafka)", file=sys.stderr)
        return 2
    sizes, counts = [int(n) for n in args.sizes.split(",")], [int(c) for c in args.producers.split(",")]
    on = brokers(args.kafka)
    print(f"{os.cpu_count()} cores; acks=1, {PARTITIONS} partitions per producer's topic, {args.seconds:.0f} s "
          f"produce windows, consumers read it all back; load average {os.getloadavg()[0]:.2f}")
    print(f"{'round':>5} {'size':>6} {'producers':>9} {'broker':>10} {'produce MB/s':>12} {'CPU s/GB':>8} "
          f"{'clients':>8} {'bound':>7} {'consume MB/s':>12} {'CPU s/GB':>8} {'clients':>8} {'bound':>7} "
          f"{'MB RSS/process':>14}")
    ratios: dict[tuple[int, int, str, str], list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        for size in sizes:
            for producers in counts:
                rows = {}
                for name, start in on:
                    row = rows[name] = measure(start, producers, size, args.seconds)
                    print(f"{round_no:>5} {size:>6} {producers:>9} {name:>10} {row['produce']:>12.1f} "
                          f"{row['produce_cpu']:>8.2f} {row['producers_cpu']:>8.2f} {_bound(row, 'produce'):>7.0f} "
                          f"{row['consume']:>12.1f} {row['consume_cpu']:>8.2f} {row['consumers_cpu']:>8.2f} "
                          f"{_bound(row, 'consume'):>7.0f} "
                          f"{row['rss']:>14.0f}", flush=True)
                for name in rows:
                    if name != "workers 2":
                        for what in ("produce", "consume"):
                            ratios.setdefault((size, producers, name, what), []).append(
                                rows["workers 2"][what] / rows[name][what])
    for (size, producers, name, what), found in ratios.items():
        print(f"{size:>6} B, {producers} producer(s), {what}: --workers 2 / {name} = "
              f"{' '.join(f'{r:.2f}x' for r in found)} (median {statistics.median(found):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
