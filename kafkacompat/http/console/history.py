"""The console's chart history: the last hour of the broker's figures at 10 s resolution, kept in the broker process.

Charts need figures over time that neither the store nor /metrics keep
(Prometheus keeps them only where one scrapes it). A task on the broker's
event loop samples every INTERVAL_S: produce and fetch rates (messages and
bytes a second) broker-wide, per stream and per topic (RequestStats.topic_totals),
each topic's and stream's size on its volumes (and each partition's, for the
first PARTITION_SERIES_MAX partitions of a topic while PARTITION_RINGS_MAX
such rings are not all taken), each replica link's lag in messages (in its
stream's scope), and each consumer group's lag in messages and in seconds
(the age of the oldest unread record: the one at the committed offset).
With `serve --workers N` the traffic is every worker's (WorkerState
traffic.read) and the sizes and lags cover every worker's partitions.
Each figure is a fixed ring of WINDOW float32 slots sharing one
ring of sample times, so the memory is bounded by the number of topics and
groups (measured by kafkacompat.bench.console_charts: about 10 KiB a topic
of one partition, at most PARTITION_RINGS_MAX more for partitions); a
deleted topic's or group's rings are dropped at the next sample, a removed
link's once the window holds none of its figures.

Per sample the store reads are bounded too: sizes of at most
SIZE_PARTITIONS_MAX partitions, and at most AGE_READS_MAX record reads for
the lag in seconds; past them a figure is left as a gap rather than making
a sample take long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import weakref
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kafkacompat import storage
from kafkacompat.protocol.records import iter_records

from ...broker.cluster import TopicError
from ..common import BROKER

if TYPE_CHECKING:
    from ...broker.cluster import Cluster
    from ..common import ServedBroker

log = logging.getLogger(__name__)
INTERVAL_S = 10.0
WINDOW = 360  # an hour of 10 s samples
SIZE_PARTITIONS_MAX = 20_000
AGE_READS_MAX = 2_000
AGE_READ_BYTES = 64 * 1024
PARTITION_SERIES_MAX = 32  # a topic's partitions charted one by one (a chart of more lines is unreadable)
PARTITION_RINGS_MAX = 8_000  # per-partition size rings in all: about 12 MiB at 1.5 KiB a ring
PARTITION_SIZE, LINK_LAG = "size_p", "link_lag:"  # series name prefixes: size_p<partition>, link_lag:<replica>
TRAFFIC = ("produced_msgs", "produced_bytes", "fetched_msgs", "fetched_bytes")
Scope = tuple[str, ...]  # ("broker",), ("stream", path), ("topic", stream, name), ("group", id)
BROKER_SCOPE: Scope = ("broker",)
_HISTORIES: "weakref.WeakKeyDictionary[ServedBroker, History]" = weakref.WeakKeyDictionary()
HISTORY: web.AppKey["History"] = web.AppKey("console_history")
SAMPLER: web.AppKey["asyncio.Task[None]"] = web.AppKey("console_history_sampler")


class History:
    """Rings of figures per scope, all written at the same sample times."""

    def __init__(self, window: int = WINDOW, interval: float = INTERVAL_S) -> None:
        self.window = window
        self.interval = interval
        self.times = array("d", [math.nan]) * window
        self.head = 0  # the next slot to write
        self.count = 0
        self.rings: dict[Scope, dict[str, array]] = {}
        # counters at the last sample, for rates: the broker's, and per topic as RequestStats names them
        self._previous: dict[str | None, list[int]] = {}
        self._last: float | None = None  # when the last sample was taken

    def begin(self, now: float) -> None:
        """The sampler starts at `now`: the first sample's rates count from here, so traffic that came before
        it is charted (without a start, the first sample could only take it as the baseline)."""
        if self._last is None:
            self._last = now

    async def sample(self, cluster: "Cluster", now: float | None = None) -> None:
        """Read the broker's figures once and write them into the next slot of every ring."""
        now = time.time() if now is None else now
        values: dict[Scope, dict[str, float]] = {}
        counted: dict[str | None, list[int]] = {}  # becomes the baseline only if the whole sample is written
        everywhere, per_topic = await _traffic(cluster)
        values[BROKER_SCOPE] = self._rates(None, now, everywhere, counted)
        topics = {(info.stream, info.name): info for info in cluster.store.list_topics()}
        for label, totals in per_topic.items():
            try:
                stream, name = cluster.split(label)
            except TopicError:  # a name no topic can have: nothing to chart
                continue
            rates = self._rates(label, now, list(totals), counted)
            if (stream, name) in topics:
                values[("topic", stream, name)] = rates
        await self._sizes(cluster, topics.values(), values)
        _add_streams(values)
        _link_lags(cluster, values)
        await self._lags(cluster, now, values)
        self._write(now, values)
        # a sample that failed on the way (a topic or group deleted under it) leaves the old baseline, so the
        # traffic it saw is charted by the next one instead of being lost
        self._previous = counted
        self._last = now

    def _rates(self, label: str | None, now: float, counters: list[int],
               counted: dict[str | None, list[int]]) -> dict[str, float]:
        """Per-second rates since the last sample; a topic first counted since then counted from zero."""
        before = self._previous.get(label)
        counted[label] = counters
        if self._last is None or now <= self._last:
            return {}
        if before is None:
            before = [0] * len(counters)
        return {name: max(count - old, 0) / (now - self._last) for name, count, old in zip(TRAFFIC, counters, before)}

    async def _sizes(self, cluster: "Cluster", topics: Iterable[storage.TopicInfo],
                     values: dict[Scope, dict[str, float]]) -> None:
        budget, rings, total = SIZE_PARTITIONS_MAX, PARTITION_RINGS_MAX, 0
        sized = []
        for info in topics:
            if budget < info.partitions:
                break
            budget -= info.partitions
            charted = min(info.partitions, PARTITION_SERIES_MAX) if rings >= info.partitions else 0
            rings -= charted
            sized.append((info, charted))
        held = await cluster.partition_figures([(info.stream, info.name, i) for info, _ in sized
                                                for i in range(info.partitions)], partitionlets=True)
        for info, charted in sized:
            figures = values.setdefault(("topic", info.stream, info.name), {})
            size = 0
            for index in range(info.partitions):
                found = held[info.stream, info.name, index]
                if isinstance(found, storage.StorageError):  # deleted meanwhile: its rings go next time
                    continue
                size += (bytes_held := sum(p.size_bytes for p in found.partitionlets))
                if index < charted:
                    figures[f"{PARTITION_SIZE}{index}"] = bytes_held
            figures["size_bytes"] = size
            total += size
        values[BROKER_SCOPE]["size_bytes"] = total

    async def _lags(self, cluster: "Cluster", now: float, values: dict[Scope, dict[str, float]]) -> None:
        reads = AGE_READS_MAX
        committed = {group: list(cluster.groups.offsets.all(group)) for group in sorted(set(cluster.groups.offsets.groups()))}
        ends = await cluster.partition_figures(sorted({(stream, c.topic, c.partition) for cursors in committed.values()
                                                       for stream, c in cursors}), partitionlets=False)
        for group, cursors in committed.items():
            messages, oldest = 0, None
            for stream, cursor in cursors:
                found = ends[stream, cursor.topic, cursor.partition]
                if isinstance(found, storage.StorageError):
                    continue
                start = max(cursor.offset, found.log_start_offset)
                behind = max(found.high_watermark - start, 0)
                messages += behind
                if behind and reads > 0:
                    reads -= 1
                    stamp = await _timestamp_at(cluster, (stream, cursor.topic, cursor.partition), start)
                    if stamp is not None:
                        oldest = stamp if oldest is None else min(oldest, stamp)
            age = max(now - oldest / 1000, 0.0) if oldest is not None else (0.0 if messages == 0 else math.nan)
            values[("group", group)] = {"lag_messages": messages, "lag_seconds": age}

    def _write(self, now: float, values: dict[Scope, dict[str, float]]) -> None:
        slot = self.head
        self.times[slot] = now
        for scope in [s for s in self.rings if s not in values]:
            del self.rings[scope]  # its topic or group is gone
        for scope, figures in values.items():
            rings = self.rings.setdefault(scope, {})
            for name in figures.keys() - rings.keys():
                rings[name] = array("f", [math.nan]) * self.window
            for name, ring in list(rings.items()):
                ring[slot] = figures.get(name, math.nan)
                if name not in figures and all(math.isnan(v) for v in ring):
                    del rings[name]  # a removed link's (or partition's) figures, gone from the whole window
        self.head = (slot + 1) % self.window
        self.count = min(self.count + 1, self.window)

    def _order(self) -> list[int]:
        start = (self.head - self.count) % self.window
        return [(start + i) % self.window for i in range(self.count)]

    def view(self, scope: Scope) -> dict[str, Any]:
        """The samples of one scope, oldest first, gaps as None."""
        order = self._order()
        series = {name: [None if math.isnan(ring[slot]) else ring[slot] for slot in order]
                  for name, ring in self.rings.get(scope, {}).items()}
        return {"interval": self.interval, "times": [self.times[slot] for slot in order], "series": series}


def _add_streams(values: dict[Scope, dict[str, float]]) -> None:
    """Each stream's figures: the sums of its topics' (kept as rings of their own, so a stream's chart reads one scope)."""
    streams: dict[Scope, dict[str, float]] = {}
    for scope, figures in list(values.items()):
        if scope[0] == "topic":
            summed = streams.setdefault(("stream", scope[1]), {})
            for name, value in figures.items():
                summed[name] = summed.get(name, 0.0) + value
    values.update(streams)


def _link_lags(cluster: "Cluster", values: dict[Scope, dict[str, float]]) -> None:
    """Each replica link's messages behind, in its source stream's scope (as `stream replica list` counts them)."""
    replication = cluster.replication
    if replication is None:
        return
    for (stream, replica), link in list(replication.links.items()):
        with contextlib.suppress(storage.StorageError):  # a topic deleted meanwhile: a gap
            values.setdefault(("stream", stream), {})[f"{LINK_LAG}{replica}"] = link.lag_messages()


def of(broker: "ServedBroker") -> History:
    """The broker's history (one per broker, so two brokers in one process keep their own)."""
    found = _HISTORIES.get(broker)
    if found is None:
        found = _HISTORIES[broker] = History()
    return found


def track(app: web.Application) -> None:
    """Sample every INTERVAL_S while the HTTP server runs."""
    history = app[HISTORY] = of(app[BROKER])

    async def run() -> None:
        history.begin(time.time())
        while True:
            cluster = app[BROKER].cluster
            if cluster is None:  # the store is not open yet
                await asyncio.sleep(1.0)
                continue
            try:
                await history.sample(cluster)
            except Exception:  # a bad sample leaves a gap; the charts must not stop for good
                log.exception("console chart sample failed")
            started = time.monotonic()
            while (left := started + history.interval - time.monotonic()) > 0:  # a changed interval applies at once
                await asyncio.sleep(min(1.0, left))

    async def start(app: web.Application) -> None:
        app[SAMPLER] = asyncio.create_task(run(), name="console-chart-history")

    async def stop(app: web.Application) -> None:
        task = app.get(SAMPLER)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


async def _traffic(cluster: "Cluster") -> tuple[list[int], dict[str, list[int]]]:
    """Produce and fetch counters ([messages in, bytes in, messages out, bytes out]) in all and per topic:
    this broker's, plus those of the other workers of `serve --workers N` (whose HTTP port this is)."""
    stats = cluster.stats
    everywhere = [stats.messages_in, stats.bytes_in, stats.messages_out, stats.bytes_out]
    per_topic = {label: list(totals) for label, totals in stats.topic_totals.items()}
    for answer in (await cluster.view.ask_peers({"op": "traffic.read"}, "chart figures")).values():
        everywhere = [a + b for a, b in zip(everywhere, answer["totals"])]
        for label, totals in answer["topics"].items():
            per_topic[label] = [a + b for a, b in zip(per_topic.get(label, [0, 0, 0, 0]), totals)]
    return everywhere, per_topic


async def _timestamp_at(cluster: "Cluster", key: tuple[str, str, int], offset: int) -> int | None:
    """The timestamp (ms) of the record at `offset` (the first one at or after it), None if unreadable."""
    try:
        data = await cluster.partition_to_read(*key).read(offset, AGE_READ_BYTES)
    except storage.StorageError:
        return None
    for record in iter_records(data):
        if record.offset >= offset:
            return record.timestamp
    return None

