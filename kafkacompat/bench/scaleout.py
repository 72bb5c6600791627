"""Scale-out benchmark: 1, 2 and 3 broker processes on one PostgreSQL + S3 store.

    python -m kafkacompat.bench.scaleout [--messages N] [--size BYTES] [--brokers 1,2,3]

For each broker count: a fresh database and key prefix, that many `serve`
processes as one cluster, a 6-partition topic; one confluent-kafka
producer (idempotent, acks=all) sends N records through all brokers, then
one consumer reads them back. Printed per row: aggregate produce and
consume throughput, the time to the backlog's first record (assign to the
first record polled), produce latency p50/p99 (produce() to delivery
report), database transactions per stored batch (pg_stat_database over the
engine's batch index; the brokers' heartbeats measured idle beforehand and
taken out), CPU seconds of the brokers, PostgreSQL, the S3 server and the
client (this process), which is where the time goes, and all of them
together as a share of the machine's cores ("host busy"). PostgreSQL and
the S3 server (moto) run on this machine too, so on 2 cores the rows
compare configurations, not hardware limits: a row near 100% busy is the
machine's figure, not the engine's.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..testing.cluster import BrokerCluster
from ..testing.services import Postgres, S3Server
from .procstats import cpu_seconds
from .workloads import produce_waiting

PARTITIONS = 6


@dataclasses.dataclass(slots=True)
class Row:
    brokers: int
    produce_msgs_s: float
    produce_mb_s: float
    p50_ms: float
    p99_ms: float
    consume_msgs_s: float
    first_record_s: float  # from assigning the backlog to the first record polled
    batches: int
    txns_per_batch: float
    cpu_brokers_s: float
    cpu_postgres_s: float
    cpu_s3_s: float
    cpu_client_s: float  # the bench process: the producer's Python loop and librdkafka's threads
    host_busy: float  # every process above together, as a share of all the machine's cores over the produce phase
    consume_cpu: tuple[float, ...]  # brokers, postgres, s3 CPU seconds while consuming


def _children(parent: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status") as fh:
                if any(line.split()[1:] == [str(parent)] for line in fh if line.startswith("PPid:")):
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


def _postgres_pids(pg: Postgres) -> list[int]:
    """The postmaster (first line of postmaster.pid) and its children: backends, writers, WAL."""
    with open(os.path.join(pg.data, "postmaster.pid")) as fh:
        postmaster = int(fh.readline())
    return [postmaster, *_children(postmaster)]


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def _commits(pg: Postgres, database: str) -> int:
    return int(pg.sql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'").strip())


def run_one(pg: Postgres, s3: S3Server, brokers: int, messages: int, size: int, linger_ms: int = 5) -> Row:
    database = pg.create_database()
    name = database.rsplit("/", 1)[1]
    args = ["--store", database, "--object-store", f"s3://kafkacompat/{uuid.uuid4().hex[:8]}"]
    with BrokerCluster(brokers, args) as cluster:
        topic = "bench"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
        pids = [b.pid for b in cluster.brokers if b.pid is not None]
        pg_pids = _postgres_pids(pg)
        s3_pids = [s3.pid] if s3.pid is not None else []

        idle_start, idle_commits = time.monotonic(), _commits(pg, name)
        time.sleep(2.0)  # the brokers' heartbeats alone: taken out of the produce phase's count
        idle_rate = (_commits(pg, name) - idle_commits) / (time.monotonic() - idle_start)

        latencies: list[float] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": linger_ms})
        payload = b"x" * size
        cpu0 = (_cpu(pids), _cpu(pg_pids), _cpu(s3_pids), time.process_time())
        commits0, start = _commits(pg, name), time.monotonic()

        def delivered(sent: float) -> Callable[[Any, Any], None]:
            def report(err: Any, msg: Any) -> None:  # librdkafka's delivery report
                if err is None:
                    latencies.append(time.monotonic() - sent)
            return report

        for _ in range(messages):
            produce_waiting(producer, topic, payload, on_delivery=delivered(time.monotonic()))
            producer.poll(0)
        assert producer.flush(120) == 0, "records left undelivered"
        produce_s = time.monotonic() - start
        commits = _commits(pg, name) - commits0 - idle_rate * produce_s
        batches = int(pg.sql("SELECT count(*) FROM kc_batches", name).strip())  # the cloud engine's batch index
        cpu1 = (_cpu(pids), _cpu(pg_pids), _cpu(s3_pids), time.process_time())

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench",
                             "enable.auto.commit": False, "fetch.max.bytes": 16 << 20})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got, start, first = 0, time.monotonic(), float("nan")
        while got < messages and time.monotonic() - start < 120:
            got += sum(1 for msg in consumer.consume(1000, timeout=0.5) if msg.error() is None)
            if got and first != first:  # NaN until the first record
                first = time.monotonic() - start
        consume_s = time.monotonic() - start
        consumer.close()
        cpu2 = (_cpu(pids), _cpu(pg_pids), _cpu(s3_pids), time.process_time())
    latencies.sort()
    return Row(
        brokers=brokers,
        produce_msgs_s=messages / produce_s,
        produce_mb_s=messages * size / produce_s / 1e6,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[int(len(latencies) * 0.99) - 1] * 1000,
        consume_msgs_s=got / consume_s,
        first_record_s=first,
        batches=batches,
        txns_per_batch=commits / batches if batches else float("nan"),
        cpu_brokers_s=cpu1[0] - cpu0[0],
        cpu_postgres_s=cpu1[1] - cpu0[1],
        cpu_s3_s=cpu1[2] - cpu0[2],
        cpu_client_s=cpu1[3] - cpu0[3],
        host_busy=sum(b - a for a, b in zip(cpu0, cpu1)) / (produce_s * (os.cpu_count() or 1)),
        consume_cpu=tuple(round(b - a, 1) for a, b in zip(cpu1[:3], cpu2[:3])),
    )


PHASES = ("buffered_ms", "slot_ms", "put_ms", "prior_ms", "commit_ms")


@dataclasses.dataclass(slots=True)
class Trickle:
    rate: int
    p50_ms: float
    p99_ms: float
    phases: dict[str, float]  # the writer's phases, median over its flushes (ms)
    batches_per_flush: float


@contextlib.contextmanager
def _writer_timing() -> Iterator[None]:
    """Brokers started meanwhile log each flush's phases (the writer's DEBUG lines, alone: the
    rest stays at INFO), by a sitecustomize module on their PYTHONPATH."""
    folder = tempfile.mkdtemp(prefix="kafkacompat-timing-")
    with open(os.path.join(folder, "sitecustomize.py"), "w") as fh:
        fh.write("import logging\nfor name in ('kafkacompat.storage.cloud.writer', 'kafkacompat.request'):\n"
                 "    logging.getLogger(name).setLevel(logging.DEBUG)\n")
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (before, folder) if p)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
        shutil.rmtree(folder, ignore_errors=True)


def _phases(logs: str) -> tuple[dict[str, float], float]:
    rows = [dict((k, float(v)) for k, v in re.findall(r"(\w+)=([\d.]+)", line.split(" flush ", 1)[1]))
            for line in logs.splitlines() if " flush batches=" in line]
    if not rows:
        return {}, float("nan")
    phases = {phase: statistics.median(r[phase] for r in rows) for phase in PHASES}
    # the request log: receipt of a Produce request to its answer handed to the socket
    answered = [float(ms) for ms in re.findall(r"Produce v\d+ from .*?, ([\d.]+) ms", logs)]
    phases["request_ms"] = statistics.median(answered) if answered else float("nan")
    return phases, statistics.mean(r["batches"] for r in rows)


def trickle(pg: Postgres, rate: int, seconds: float, size: int, linger_ms: int = 5,
            flush_ms: int = 10) -> Trickle:
    """One broker, one producer at a steady `rate` msg/s (acks=all, idempotent): produce latency,
    and where the writer's time went per flush."""
    database = pg.create_database()
    args = ["--store", database, "--object-store", f"s3://kafkacompat/{uuid.uuid4().hex[:8]}",
            "--store-flush-ms", str(flush_ms)]
    with _writer_timing(), BrokerCluster(1, args) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("trickle", PARTITIONS, 1)])["trickle"].result(timeout=30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": linger_ms})
        latencies: list[float] = []
        producer.produce("trickle", b"warm-up")
        producer.flush(30)
        payload, start = b"x" * size, time.monotonic()
        for n in range(int(rate * seconds)):
            due = start + n / rate
            while (ahead := due - time.monotonic()) > 0:
                producer.poll(ahead)
            sent = time.monotonic()
            produce_waiting(producer, "trickle", payload,
                            on_delivery=lambda err, _msg, sent=sent: err or latencies.append(time.monotonic() - sent))
        assert producer.flush(60) == 0, "records left undelivered"
        phases, per_flush = _phases(cluster.brokers[0].output(1 << 26))
    latencies.sort()
    return Trickle(rate, statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.99) - 1] * 1000,
                   phases, per_flush)


def failover(pg: Postgres, s3: S3Server, lease_ms: int, heartbeat_ms: int) -> float:
    """Seconds from kill -9 of partition 0's leader until another broker's Metadata names a new one."""
    database = pg.create_database()
    args = ["--store", database, "--object-store", f"s3://kafkacompat/{uuid.uuid4().hex[:8]}",
            "--cluster-lease-ms", str(lease_ms), "--cluster-heartbeat-ms", str(heartbeat_ms)]
    with BrokerCluster(3, args) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("failover", 3, 1)])["failover"].result(timeout=30)

        def leader() -> int:
            found = watcher.list_topics("failover", timeout=5)
            return found.topics["failover"].partitions[0].leader

        watcher = admin
        victim = leader()
        survivor = next(b for node_id, b in enumerate(cluster.brokers, 1) if node_id != victim)
        watcher = AdminClient({"bootstrap.servers": survivor.bootstrap})
        cluster.broker(victim).kill()
        killed = time.monotonic()
        while leader() in (-1, victim):
            if time.monotonic() - killed > 60:
                raise RuntimeError("no new leader within 60 s")
            time.sleep(0.01)
        return time.monotonic() - killed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.scaleout", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--messages", type=int, default=30_000, help="records produced per row (default 30000)")
    parser.add_argument("--size", type=int, default=512, help="bytes per record value (default 512)")
    parser.add_argument("--brokers", default="1,2,3", help="broker counts to run, comma-separated (default 1,2,3)")
    parser.add_argument("--failovers", type=int, default=3, help="kill -9 trials timing leader moves (default 3)")
    parser.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms (default 5; 0-1 sends "
                        "many small requests, which per-connection pipelining is for)")
    parser.add_argument("--trickle-rate", type=int, default=1000, help="msg/s of the latency run on one broker, "
                        "0: none (default 1000)")
    parser.add_argument("--trickle-seconds", type=float, default=5.0, help="length of the latency run (default 5)")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.brokers.split(",") if n]
    with Postgres() as pg, S3Server() as s3:
        os.environ.update(s3.environ())  # the brokers' endpoint and credentials, as users give them
        s3.create_bucket("kafkacompat")
        rows = [run_one(pg, s3, n, args.messages, args.size, args.linger_ms) for n in counts]
        slow = trickle(pg, args.trickle_rate, args.trickle_seconds, args.size) if args.trickle_rate else None
        settings = [(2000, 200), (6000, 1000)]  # the tests' and the defaults' lease / heartbeat (ms)
        moves = {lease_hb: [failover(pg, s3, *lease_hb) for _ in range(args.failovers)] for lease_hb in settings}
    header = ("brokers", "produce msg/s", "MB/s", "p50 ms", "p99 ms", "consume msg/s", "first rec s", "batches",
              "db txns/batch", "cpu brokers s", "cpu postgres s", "cpu s3 s", "cpu client s", "host busy")
    print(f"{os.cpu_count()} cores; {args.messages} records of {args.size} B, {PARTITIONS} partitions, "
          f"idempotent acks=all, linger.ms={args.linger_ms}")
    print("  ".join(f"{h:>13}" for h in header))
    for r in rows:
        print("  ".join(f"{v:>13}" for v in (
            r.brokers, f"{r.produce_msgs_s:,.0f}", f"{r.produce_mb_s:.2f}", f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}",
            f"{r.consume_msgs_s:,.0f}", f"{r.first_record_s:.2f}", r.batches, f"{r.txns_per_batch:.2f}", f"{r.cpu_brokers_s:.1f}",
            f"{r.cpu_postgres_s:.1f}", f"{r.cpu_s3_s:.1f}", f"{r.cpu_client_s:.1f}", f"{r.host_busy:.0%}")))
    print("cpu seconds while consuming (brokers, postgres, s3): "
          + "; ".join(f"{r.brokers} broker(s): {r.consume_cpu}" for r in rows))
    if slow is not None:
        print(f"1 broker at {slow.rate} msg/s (linger.ms=5): produce p50 {slow.p50_ms:.1f} ms, p99 {slow.p99_ms:.1f} ms;"
              f" per flush (median ms, {slow.batches_per_flush:.1f} batches a flush): "
              + ", ".join(f"{k.removesuffix('_ms')} {v:.1f}" for k, v in slow.phases.items()))
    for (lease, heartbeat), seconds in moves.items():
        print(f"leader of a partition moved after kill -9 with lease {lease} ms, heartbeat {heartbeat} ms: "
              + ", ".join(f"{s:.2f} s" for s in seconds) + f" (bound: lease + heartbeat = {(lease + heartbeat) / 1000} s)")


if __name__ == "__main__":
    main()
