"""Worker benchmark: aggregate produce throughput of `serve --workers 1` against `--workers 2`.

    python -m kafkacompat.bench.workers [--seconds S] [--size BYTES] [--producers 1,3] [--rounds R]

One asyncio broker process uses one core; `--workers N` runs N over one
store. Each row: P librdkafka producers (separate processes, acks=1, one
4-partition topic each, so each producer's load is split over the workers),
sending as fast as they can for S seconds; printed: aggregate MB/s
delivered and the brokers' CPU seconds per GB. The machine may be shared
and loaded, so the configurations run side by side: every round runs each
(producers, workers) pair once, in turn, and the ratio per round is printed
with the median over rounds. The producers run on the same cores as the
brokers: on a small machine the figures compare configurations, not
hardware limits.
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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .procstats import cpu_seconds, peak_rss_mb

PARTITIONS = 4
START_TIMEOUT_S = 120.0


class Served:
    """`kafkacompat serve --workers N` on a fresh data dir; its log goes to a file the ports are read from."""

    def __init__(self, workers: int, data_dir: str) -> None:
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
            return [int(p) for p in re.findall(r"worker \d+ started \(pid (\d+)", f.read())]

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
    producer.flush(30)
    out.put(counted)


def measure(workers: int, producers: int, size: int, seconds: float) -> tuple[float, float, float]:
    """(aggregate MB/s, broker CPU seconds per GB, peak MB resident per worker) of `producers`
    producers against `--workers workers`."""
    with tempfile.TemporaryDirectory(prefix="kc-bench-workers-") as data_dir:
        served = Served(workers, data_dir)
        try:
            topics = [f"bench-{i}" for i in range(producers)]
            admin = AdminClient({"bootstrap.servers": served.bootstrap, "log_level": 0})
            for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
                future.result(30)
            _wait_listed(served, topics)
            ctx = multiprocessing.get_context("spawn")
            out = ctx.Queue()
            start_at = time.time() + 3.0  # every producer connected before the window opens
            procs = [ctx.Process(target=_produce, args=(served.bootstrap, t, size, seconds, start_at, out))
                     for t in topics]
            for p in procs:
                p.start()
            while time.time() < start_at:
                time.sleep(0.01)
            cpu_before = served.cpu()
            total = sum(out.get(timeout=seconds + 120) for _ in procs)
            cpu = served.cpu() - cpu_before
            for p in procs:
                p.join(60)
            rss = served.rss_per_worker()
        finally:
            served.stop()
    return total / seconds / 1e6, cpu / (total / 1e9) if total else float("nan"), rss


def _wait_listed(served: Served, topics: list[str]) -> None:
    """Every worker lists the topics (workers other than 0 take in the catalog within a moment)."""
    for port in served.ports:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
        deadline = time.monotonic() + 30
        while not all(len(admin.list_topics(t, timeout=10).topics[t].partitions) == PARTITIONS for t in topics):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker at port {port} never listed {topics}")
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="produce window per measurement")
    parser.add_argument("--size", type=int, default=16384, help="record value size in bytes")
    parser.add_argument("--producers", default="1,3", help="producer counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="times every pair runs, interleaved")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.producers.split(",")]
    print(f"{os.cpu_count()} cores; {args.size} B records, acks=1, {PARTITIONS} partitions per producer's topic, "
          f"{args.seconds:.0f} s windows")
    print(f"{'round':>5} {'producers':>9} {'workers':>7} {'MB/s':>8} {'CPU s/GB':>9} {'MB RSS/worker':>13}")
    ratios: dict[int, list[float]] = {c: [] for c in counts}
    for round_no in range(1, args.rounds + 1):
        for producers in counts:
            rates = {}
            for workers in (1, 2):
                rate, cpu_per_gb, rss = measure(workers, producers, args.size, args.seconds)
                rates[workers] = rate
                print(f"{round_no:>5} {producers:>9} {workers:>7} {rate:>8.1f} {cpu_per_gb:>9.2f} {rss:>13.0f}",
                      flush=True)
            ratios[producers].append(rates[2] / rates[1])
    for producers, found in ratios.items():
        print(f"{producers} producer(s): --workers 2 / --workers 1 = "
              f"{' '.join(f'{r:.2f}x' for r in found)} (median {statistics.median(found):.2f}x)")


if __name__ == "__main__":
    main()
