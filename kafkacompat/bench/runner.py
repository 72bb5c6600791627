"""The benchmark plan and its execution: cells of workloads, one fresh broker per cell.

A throughput cell (message size, partitions) produces with acks=1, consumes
that data from the earliest offset, then produces with acks=all to a second
topic and transactionally (acks=all, a commit every `per_transaction`
messages) to a third, so the cost of transactions reads off one run. A latency cell produces at a fixed rate with acks=1 and acks=all.
In --vs mode each cell runs on both brokers back to back, the order
alternating, so drift of a shared machine hits both alike.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence

from . import java_tools, workloads
from .brokers import Broker, BrokerStartError
from .procstats import Meter
from .workloads import Outcome, percentile

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    sizes: tuple[int, ...] = (100, 1024, 16 * 1024)
    partitions: tuple[int, ...] = (1, 8)
    produce_s: float = 3.0
    latency_size: int = 1024
    latency_rate: int = 10_000
    latency_s: float = 5.0
    warmup_s: float = 1.0
    stall_s: float = 10.0
    rounds: int = 1
    per_transaction: int = 1000  # messages per transaction in the produce-txn row
    client: str = "librdkafka"  # or "java": Kafka 4.1's perf tools (java_tools)
    java_produce_mb: float = 256.0  # the Java producer's budget per produce row (it counts records, not time)

    def java_records(self, size: int) -> int:
        """Records for one Java produce row: the byte budget, within 20,000..1,000,000."""
        return min(max(int(self.java_produce_mb * 1e6 / size), 20_000), 1_000_000)


QUICK = Settings(produce_s=0.3, latency_s=0.5, warmup_s=0.2, stall_s=5.0, java_produce_mb=16.0)


@dataclasses.dataclass(slots=True)
class Row:
    """One workload on one broker: what the table and the JSON show."""

    broker: str
    round: int
    workload: str  # produce, consume, produce-txn, latency
    size: int
    partitions: int
    acks: int | None  # None for consume
    messages: int = 0
    seconds: float = 0.0
    msg_per_s: float | None = None
    mb_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    cpu_s: float | None = None
    cpu_us_per_msg: float | None = None
    peak_rss_mib: float | None = None
    status: str = "ok"

    @property
    def key(self) -> tuple[int, str, int, int, int | None]:
        """What pairs this row with the other broker's row in --vs mode."""
        return (self.round, self.workload, self.size, self.partitions, self.acks)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def fill(self, outcome: Outcome, meter: Meter) -> None:
        self.messages, self.seconds, self.status = outcome.messages, outcome.seconds, outcome.status
        if outcome.seconds > 0 and outcome.messages > 0:
            self.msg_per_s = outcome.messages / outcome.seconds
            self.mb_per_s = self.msg_per_s * self.size / 1e6
        if outcome.latencies_ms:
            ordered = sorted(outcome.latencies_ms)
            self.p50_ms, self.p99_ms, self.p999_ms = (percentile(ordered, f) for f in (0.5, 0.99, 0.999))
        elif outcome.percentiles_ms is not None:
            self.p50_ms, self.p99_ms, self.p999_ms = outcome.percentiles_ms
        usage = meter.usage()
        if usage is not None:
            self.cpu_s, self.peak_rss_mib = usage.cpu_seconds, usage.peak_rss_mb
            if outcome.messages:
                self.cpu_us_per_msg = usage.cpu_seconds / outcome.messages * 1e6


@dataclasses.dataclass(frozen=True, slots=True)
class Cell:
    kind: str  # throughput or latency
    size: int
    partitions: int

    def rows(self, broker: str, round_: int, client: str = "librdkafka") -> list[Row]:
        if self.kind == "latency":
            return [Row(broker, round_, "latency", self.size, self.partitions, acks) for acks in (1, -1)]
        rows = [
            Row(broker, round_, "produce", self.size, self.partitions, 1),
            Row(broker, round_, "consume", self.size, self.partitions, None),
            Row(broker, round_, "produce", self.size, self.partitions, -1),
        ]
        if client == "librdkafka":  # the Java perf tool's transactions are timed, not counted per commit
            rows.append(Row(broker, round_, "produce-txn", self.size, self.partitions, -1))
        return rows


def cells(settings: Settings) -> list[Cell]:
    out = [Cell("throughput", size, parts) for size in settings.sizes for parts in settings.partitions]
    out.append(Cell("latency", settings.latency_size, 1))
    return out


def _topic(row: Row) -> str:
    acks = "all" if row.acks == -1 else row.acks
    return f"bench-{row.workload}-{row.size}b-{row.partitions}p-acks{acks}-{uuid.uuid4().hex[:8]}"


def _fail(row: Row, status: str) -> None:
    row.status = status
    log.warning("%s %s %dB/%dp acks=%s: %s", row.broker, row.workload, row.size, row.partitions, row.acks, status)


def run_cell(broker: Broker, cell: Cell, settings: Settings, round_: int) -> list[Row]:
    """Start the broker, run the cell's workloads in order, stop it; every row comes back."""
    rows = cell.rows(broker.name, round_, settings.client)
    try:
        with broker:
            _run_rows(broker, cell, settings, rows)
    except BrokerStartError as exc:
        for row in rows:
            _fail(row, f"broker did not start: {exc}")
    return rows


def _run_rows(broker: Broker, cell: Cell, settings: Settings, rows: list[Row]) -> None:
    bootstrap = broker.bootstrap
    topics = {id(row): _topic(row) for row in rows if row.workload != "consume"}
    try:
        workloads.create_topics(bootstrap, [(name, cell.partitions) for name in topics.values()])
    except Exception as exc:  # noqa: BLE001 - reported in every row
        for row in rows:
            _fail(row, f"topic creation failed: {exc}")
        return
    source: tuple[str, int] | None = None  # (topic, messages) the consume row reads
    for row in rows:
        meter = Meter(broker.pid)
        try:
            if settings.client == "java":
                outcome = _java_row(bootstrap, topics, row, cell, settings, source)
                if row.workload == "produce" and source is None:
                    source = (topics[id(row)], outcome.messages)
            elif row.workload == "produce":
                outcome = workloads.produce(bootstrap, topics[id(row)], row.size, row.acks or 1, settings.produce_s)
                if source is None:
                    source = (topics[id(row)], outcome.messages)
            elif row.workload == "produce-txn":
                outcome = workloads.produce(bootstrap, topics[id(row)], row.size, -1, settings.produce_s,
                                            settings.per_transaction)
            elif row.workload == "consume":
                if not source or not source[1]:
                    _fail(row, "nothing to consume: the produce run before it delivered nothing")
                    continue
                outcome = workloads.consume(bootstrap, source[0], cell.partitions, source[1], settings.stall_s)
            else:
                outcome = workloads.latency(
                    bootstrap, topics[id(row)], row.size, row.acks or 1, settings.latency_rate,
                    settings.latency_s, settings.warmup_s, settings.stall_s,
                )
        except Exception as exc:  # noqa: BLE001 - a failing broker must not end the run
            log.debug("workload failed", exc_info=True)
            _fail(row, f"error: {exc}")
            continue
        row.fill(outcome, meter)
        if not row.ok:
            _fail(row, row.status)


def _java_row(bootstrap: str, topics: dict[int, str], row: Row, cell: Cell, settings: Settings,
              source: tuple[str, int] | None) -> Outcome:
    """One row with Kafka 4.1's perf tools: saturated produce, consume, or produce at a fixed rate."""
    if row.workload == "produce":
        return java_tools.produce(bootstrap, topics[id(row)], row.size, row.acks or 1, settings.java_records(row.size))
    if row.workload == "consume":
        if not source or not source[1]:
            return Outcome(0, 0.0, status="nothing to consume: the produce run before it delivered nothing")
        return java_tools.consume(bootstrap, source[0], source[1], settings.stall_s)
    records = max(int(settings.latency_rate * (settings.latency_s + settings.warmup_s)), 1)
    return java_tools.produce(bootstrap, topics[id(row)], row.size, row.acks or 1, records, settings.latency_rate)


BrokerFactory = Callable[[], Broker]


def schedule(settings: Settings, factories: Sequence[BrokerFactory]) -> Iterator[tuple[int, Cell, BrokerFactory]]:
    """(round, cell, broker) in run order; with two brokers their order alternates cell by cell."""
    step = 0
    for round_ in range(1, settings.rounds + 1):
        for cell in cells(settings):
            order = list(factories) if step % 2 == 0 or len(factories) < 2 else list(reversed(factories))
            for factory in order:
                yield round_, cell, factory
            step += 1


def run(settings: Settings, factories: Sequence[BrokerFactory], progress: Callable[[Row], None]) -> list[Row]:
    rows: list[Row] = []
    for round_, cell, factory in schedule(settings, factories):
        for row in run_cell(factory(), cell, settings, round_):
            progress(row)
            rows.append(row)
    return rows
