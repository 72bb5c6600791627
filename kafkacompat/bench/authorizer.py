"""What the authorizer costs: produce throughput with ACLs checked against the same broker without them.

    python -m kafkacompat.bench.authorizer [--rounds 3] [--small 50000] [--large 2000]

Starts two `kafkacompat serve` processes with a PLAINTEXT listener each:
one plain, one with the authorizer on, where the producing principal
(User:ANONYMOUS) holds a prefixed WRITE ACL on the topics, so every produce
request goes through the ACL lookup it would in production (not a super
user's short cut). A SASL_PLAINTEXT listener on the authorizing broker lets
the super user create the topics and the grant. Per round and per size
(100 B and 16 KiB messages) each broker gets the same produce load with
confluent-kafka (acks=all); the rounds interleave the brokers so drift on a
shared machine hits both alike. Prints median MB/s and messages/s and the
authorizer's cost in percent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ..testing.ports import free_port
from .tls import _wait_listening
from .workloads import produce_waiting

ADMIN, PASSWORD = "admin", "bench-admin-password"
SIZES = (100, 16 * 1024)


def _serve(data_dir: str, port: int, sasl_port: int | None) -> subprocess.Popen:
    command = [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", data_dir, "--log-level", "WARNING",
               "--listener", f"PLAINTEXT://127.0.0.1:{port}"]
    if sasl_port is not None:
        command += ["--listener", f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}", "--authorizer",
                    "--super-user", f"User:{ADMIN}"]
    return subprocess.Popen(command)


def _prepare(port: int, sasl_port: int | None, topics: list[str]) -> None:
    """The topics, and on the authorizing broker the producer's grant (made by the super user over SASL)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    config = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if sasl_port is not None:
        config = {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": PASSWORD}
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(t, 1) for t in topics]).values():
        future.result(30)
    if sasl_port is not None:
        grant = AclBinding(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        for future in admin.create_acls([grant]).values():
            future.result(30)


def _produce(port: int, topic: str, count: int, payload: bytes) -> float:
    """Seconds to produce `count` messages, all delivered (a refused one stops the run: it would flatter)."""
    from confluent_kafka import Producer

    failed: list[str] = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "linger.ms": 5,
                         "batch.size": 1_000_000})
    producer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    for _ in range(count):
        produce_waiting(producer, topic, payload, on_delivery=lambda err, _: failed.append(str(err)) if err else None)
    if producer.flush(120) or failed:
        raise RuntimeError(f"messages not delivered: {failed[:1] or 'flush timed out'}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.authorizer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=50_000, help="messages of 100 B per round")
    parser.add_argument("--large", type=int, default=2_000, help="messages of 16 KiB per round")
    args = parser.parse_args(argv)
    counts = dict(zip(SIZES, (args.small, args.large)))
    kinds = ("off", "on")
    results: dict[tuple[str, int], list[float]] = {(kind, size): [] for kind in kinds for size in SIZES}
    with tempfile.TemporaryDirectory(prefix="kafkacompat-bench-authz-") as tmp:
        ports = {kind: free_port() for kind in kinds}
        sasl_port = free_port()
        subprocess.run([sys.executable, "-m", "kafkacompat", "user", "add", ADMIN, "--password-stdin",
                        "--data-dir", os.path.join(tmp, "on")], input=PASSWORD + "\n", text=True, check=True,
                       capture_output=True)
        procs = {kind: _serve(os.path.join(tmp, kind), ports[kind], sasl_port if kind == "on" else None)
                 for kind in kinds}
        try:
            topics = [f"bench-{size}-{n}" for size in SIZES for n in range(args.rounds)]
            for kind in kinds:
                _wait_listening(ports[kind], procs[kind])
                _prepare(ports[kind], sasl_port if kind == "on" else None, topics)
            for round_no in range(args.rounds):
                for size in SIZES:
                    payload = os.urandom(size)
                    for kind in kinds if round_no % 2 == 0 else reversed(kinds):
                        seconds = _produce(ports[kind], f"bench-{size}-{round_no}", counts[size], payload)
                        results[(kind, size)].append(counts[size] / seconds)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(30)
    print(f"produce, acks=all, {args.rounds} rounds, medians; authorizer on = a prefixed WRITE ACL checked per request")
    for size in SIZES:
        off, on = (statistics.median(results[(kind, size)]) for kind in kinds)
        print(f"  {size:>6} B  off {off:9.0f} msg/s {off * size / 1e6:7.1f} MB/s   "
              f"on {on:9.0f} msg/s {on * size / 1e6:7.1f} MB/s   cost {100 * (off - on) / off:+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
