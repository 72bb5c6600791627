"""Produce throughput with the request log off and at DEBUG, measured side by side in one run.

    python -m kafkacompat.bench.request_log [--messages 20000] [--size 100] [--rounds 3]

The request log (logger `kafkacompat.request`) writes one DEBUG line per
request; off, it must cost nothing measurable: one level check per request.
This runs a broker in this process, logging to a file as `serve` does, and
a confluent-kafka producer in a child process (so the client does not share
the broker's interpreter). The producer sends small messages in batches of
one, so requests, not bytes, are what is counted. Rounds alternate the
logger between INFO (off) and DEBUG, so drift on a shared machine hits both
alike; it prints the median requests/s of each and their ratio, and what the
level check alone costs per request.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

from ..log_format import TEXT_FORMAT
from ..testing import Broker
from .workloads import produce_waiting

REQUEST_LOG = "kafkacompat.request"
MODULE = "kafkacompat.bench.request_log"  # run again as the producer child


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    """The child: `count` messages, one per Produce request (acks=1), then the seconds taken on stdout."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "batch.num.messages": 1,
                         "max.in.flight": 5})
    producer.list_topics(topic, timeout=10)
    payload = b"x" * size
    start = time.perf_counter()
    for _ in range(count):
        produce_waiting(producer, topic, payload)
    if producer.flush(120):
        raise RuntimeError("messages left undelivered")
    print(time.perf_counter() - start)


def _round(broker: Broker, topic: str, count: int, size: int) -> tuple[float, int]:
    """(seconds, Produce requests the broker answered) for one round."""
    stats = broker.server.cluster.stats
    before = sum(n for (key, _), n in stats.requests.items() if key == 0)
    done = subprocess.run([sys.executable, "-m", MODULE, "--child", broker.bootstrap_servers, topic, str(count),
                           str(size)], capture_output=True, text=True, check=True, timeout=300)
    after = sum(n for (key, _), n in stats.requests.items() if key == 0)
    return float(done.stdout.strip()), after - before


def _check_cost() -> float:
    """Nanoseconds one `isEnabledFor(DEBUG)` takes on a logger that is off: the whole cost of the log when off."""
    logger = logging.getLogger(REQUEST_LOG)
    runs = 200_000
    return min(timeit.repeat(lambda: logger.isEnabledFor(logging.DEBUG), number=runs, repeat=5)) / runs * 1e9


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _produce(argv[1], argv[2], int(argv[3]), int(argv[4]))
        return 0
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--messages", type=int, default=20_000, help="messages per round (default 20000)")
    parser.add_argument("--size", type=int, default=100, help="bytes per message (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each mode (default 3)")
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {"off": [], "DEBUG": []}
    with tempfile.NamedTemporaryFile("w", prefix="kafkacompat-request-log-", suffix=".log") as log_file:
        handler = logging.FileHandler(log_file.name)
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            with Broker() as broker:
                for round_no in range(args.rounds):
                    for mode in results:
                        logging.getLogger(REQUEST_LOG).setLevel(logging.DEBUG if mode == "DEBUG" else logging.INFO)
                        seconds, requests = _round(broker, f"bench-{mode}-{round_no}", args.messages, args.size)
                        results[mode].append(requests / seconds)
                logging.getLogger(REQUEST_LOG).setLevel(logging.NOTSET)
                check_ns = _check_cost()
        finally:
            root.removeHandler(handler)
            handler.close()
    off, debug = (statistics.median(results[m]) for m in ("off", "DEBUG"))
    print(f"{args.messages} messages of {args.size} bytes per round, one per Produce request, {args.rounds} rounds")
    for mode, rates in results.items():
        print(f"  request log {mode:<5}  median {statistics.median(rates):8.0f} requests/s   rounds: "
              + ", ".join(f"{r:.0f}" for r in rates))
    print(f"  DEBUG / off: {debug / off:.3f}x")
    print(f"  off costs one level check per request: {check_ns:.0f} ns, "
          f"{check_ns / (1e9 / off) * 100:.3f}% of a request at {off:.0f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
