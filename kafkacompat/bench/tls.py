"""Produce and consume throughput over TLS (SSL, SASL_SSL) against plaintext, measured side by side.

    python -m kafkacompat.bench.tls [--messages 4000] [--size 16384] [--rounds 3]

Starts one `kafkacompat serve` process with PLAINTEXT, SSL and SASL_SSL
listeners (a throwaway CA, made with the `cryptography` package), then per
round and per listener produces --messages messages of --size bytes with
confluent-kafka (acks=all) and consumes them back; prints MB/s and the
ratio to plaintext. The rounds interleave the listeners so drift on a
shared machine hits all of them alike.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from ..testing.certificates import CertificateAuthority
from ..testing.ports import free_port
from .workloads import produce_waiting

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-password"


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited during start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the broker did not start listening")


def _client(protocol: str, port: int, ca: str) -> dict[str, str]:
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol}
    if protocol != "PLAINTEXT":
        config["ssl.ca.location"] = ca
    if protocol == "SASL_SSL":
        config.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD})
    return config


def _produce(config: dict[str, str], topic: str, count: int, payload: bytes) -> float:
    from confluent_kafka import Producer

    producer = Producer({**config, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000})
    producer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    for _ in range(count):
        produce_waiting(producer, topic, payload)
    if producer.flush(120):
        raise RuntimeError("messages left undelivered")
    return time.perf_counter() - start


def _consume(config: dict[str, str], topic: str, count: int) -> float:
    """Seconds from assigning the partition (no group: no rebalance delay) to its last message."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.list_topics(topic, timeout=10)  # connected (and authenticated) before the clock starts
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + 120
    while got < count and time.monotonic() < deadline:
        got += sum(1 for message in consumer.consume(1000, 1.0) if message.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.tls", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--size", type=int, default=16 * 1024, help="bytes per message (default 16 KiB)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    payload = os.urandom(args.size)
    with tempfile.TemporaryDirectory(prefix="kafkacompat-bench-tls-") as tmp:
        ca = CertificateAuthority(os.path.join(tmp, "ca"))
        server = ca.issue("broker", {"CN": "localhost"}, server=True)
        ports = {name: free_port() for name in LISTENERS}
        data_dir = os.path.join(tmp, "data")
        subprocess.run([sys.executable, "-m", "kafkacompat", "user", "add", USER, "--password-stdin",
                        "--data-dir", data_dir], input=PASSWORD + "\n", text=True, check=True, capture_output=True)
        command = [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", data_dir, "--log-level", "WARNING",
                   "--ssl-certificate-location", server.certificate, "--ssl-key-location", server.key]
        for name, port in ports.items():
            command += ["--listener", f"{name}://127.0.0.1:{port}"]
        proc = subprocess.Popen(command)
        try:
            _wait_listening(ports["PLAINTEXT"], proc)  # every listener starts serving at once
            results: dict[str, dict[str, list[float]]] = {n: {"produce": [], "consume": []} for n in LISTENERS}
            megabytes = args.messages * args.size / 1e6
            for round_no in range(args.rounds):
                for name in LISTENERS:
                    config = _client(name, ports[name], ca.location)
                    topic = f"bench-{name.lower()}-{round_no}"
                    results[name]["produce"].append(megabytes / _produce(config, topic, args.messages, payload))
                    results[name]["consume"].append(megabytes / _consume(config, topic, args.messages))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"{args.messages} messages of {args.size} bytes, {args.rounds} rounds, median MB/s (ratio to PLAINTEXT)")
    base = {op: statistics.median(results["PLAINTEXT"][op]) for op in ("produce", "consume")}
    for name in LISTENERS:
        cells = []
        for op in ("produce", "consume"):
            value = statistics.median(results[name][op])
            cells.append(f"{op} {value:7.1f} MB/s ({value / base[op]:.2f}x)")
        print(f"  {name:<10} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
