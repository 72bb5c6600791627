"""The /metrics families that need the store's async reads: partitions, partitionlets, lag, store activity.

Cardinality rule (a million topics must not make a million series): every
series labelled by topic, partition or group exists only for the topics
that have their own traffic series, i.e. the first `metrics_topic_series`
topics that carried traffic (default 0: none), and each such family stops
at SERIES_MAX series per scrape (the broker logs once when it does).
Everything else is a broker-wide figure whose label set is fixed (volume,
group state).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kafkacompat import storage

if TYPE_CHECKING:
    from ..broker.cluster import Cluster
    from .common import ServedBroker

log = logging.getLogger(__name__)
SERIES_MAX = 10_000  # per family and scrape: partitions of the per-topic-series topics, lag series
_warned: set[str] = set()


class Families:
    """A ready list of families, shaped as prometheus_client's generate_latest wants a registry."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _capped(name: str, count: int) -> bool:
    """Has family `name` reached SERIES_MAX? (logged once per family)"""
    if count < SERIES_MAX:
        return False
    if name not in _warned:
        _warned.add(name)
        log.warning("%s: more than %d series; the rest are left out of /metrics", name, SERIES_MAX)
    return True


async def families(broker: "ServedBroker", lag: bool = True) -> Families:
    """The families; `lag` adds the group lag (worker 0 of `serve --workers N` counts it for every
    worker's groups and partitions: it follows the cursor logs every worker writes)."""
    cluster = broker.cluster
    out: list[Metric] = [
        CounterMetricFamily("kafkacompat_connections_accepted", "Kafka client connections accepted",
                            value=broker.connections_accepted),
        CounterMetricFamily("kafkacompat_connections_refused",
                            "Kafka client connections refused (max_connections, max_connections_per_ip)",
                            value=broker.connections_refused),
    ]
    if cluster is None:
        return Families(out)
    out += _producers(cluster)
    out += _activity(cluster.store)
    out += _groups(cluster)
    partitions = await _partitions(cluster)
    out += partitions
    if lag:
        out += await _lag(cluster)
    out += await _replication(cluster)
    return Families(out)


async def _replication(cluster: "Cluster") -> list[Metric]:
    """Per replica link (few per stream, so uncapped): how far behind it is and what it shipped."""
    labels = ["stream", "replica"]
    behind = GaugeMetricFamily("kafkacompat_replication_lag_messages",
                               "messages of the stream not yet on the replica", labels=labels)
    behind_bytes = GaugeMetricFamily("kafkacompat_replication_lag_bytes",
                                     "bytes of the stream not yet on the replica (estimated)", labels=labels)
    shipped = CounterMetricFamily("kafkacompat_replication_shipped_bytes",
                                  "bytes shipped to the replica since the broker started", labels=labels)
    up = GaugeMetricFamily("kafkacompat_replication_link_up",
                           "1 when the link is in-sync or pending, 0 when paused or broken", labels=labels)
    if cluster.replication is not None:
        for link in list(cluster.replication.links.values()):
            status = await link.status()
            key = [status["stream"], status["replica"]]
            behind.add_metric(key, status["lag_messages"])
            behind_bytes.add_metric(key, status["lag_bytes"])
            shipped.add_metric(key, status["shipped_bytes"])
            up.add_metric(key, 1 if status["state"] in ("in-sync", "pending") else 0)
    return [behind, behind_bytes, shipped, up]


def _producers(cluster: "Cluster") -> list[Metric]:
    return [
        GaugeMetricFamily("kafkacompat_producer_ids", "distinct producer ids with idempotence state kept",
                          value=cluster.producers.producer_ids()),
        CounterMetricFamily("kafkacompat_producer_ids_issued", "producer ids handed out (InitProducerId)",
                            value=cluster.producers.issued),
    ]


def _activity(store: storage.Store) -> list[Metric]:
    activity = getattr(store, "activity", None)
    if activity is None:
        return []
    return [
        CounterMetricFamily("kafkacompat_log_fsyncs", "fsyncs of partition logs (each covers every append before it)",
                            value=activity.fsyncs),
        CounterMetricFamily("kafkacompat_log_fsync_seconds", "time spent in fsyncs of partition logs",
                            value=activity.fsync_seconds),
        CounterMetricFamily("kafkacompat_log_fsync_failures", "fsyncs of partition logs that failed",
                            value=activity.fsync_failures),
        CounterMetricFamily("kafkacompat_retention_passes", "retention passes over the partitions",
                            value=activity.retention_passes),
        CounterMetricFamily("kafkacompat_retention_deleted_partitionlets",
                            "partitionlets deleted by retention (ttl or size cap)",
                            value=activity.retention_deleted_partitionlets),
        CounterMetricFamily("kafkacompat_retention_deleted_bytes", "bytes deleted by retention",
                            value=activity.retention_deleted_bytes),
    ]


def _groups(cluster: "Cluster") -> list[Metric]:
    states = collections.Counter(state for _, _, state, _ in cluster.groups.list_groups())
    family = GaugeMetricFamily("kafkacompat_consumer_groups", "live consumer groups, per state", labels=["state"])
    for state, count in sorted(states.items()):
        family.add_metric([state], count)
    return [family]


def _series_topics(cluster: "Cluster") -> list[tuple[str, storage.TopicInfo]]:
    """(label, topic) of the topics with their own series that still exist, by label."""
    found = []
    for label in sorted(cluster.stats.series_topics):
        info, _ = cluster.topic_for(label)
        if info is not None:
            found.append((label, info))
    return found


async def _partitions(cluster: "Cluster") -> list[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafkacompat_partition_size_bytes", "bytes a partition holds on its volumes", labels=labels)
    lets = GaugeMetricFamily("kafkacompat_partition_partitionlets", "partitionlets in a partition's chain", labels=labels)
    start = GaugeMetricFamily("kafkacompat_partition_start_offset", "a partition's log start offset", labels=labels)
    end = GaugeMetricFamily("kafkacompat_partition_end_offset", "a partition's end offset (high watermark)",
                            labels=labels)
    per_volume: collections.Counter[str] = collections.Counter()
    count = 0
    for label, info in _series_topics(cluster):
        for index in range(info.partitions):
            if _capped("kafkacompat_partition_size_bytes", count):
                break
            try:
                partition = cluster.store.partition(info.stream, info.name, index)  # another worker's shows its own
                chain = await partition.partitionlets()
            except storage.StorageError:  # deleted meanwhile, its files unreadable (logged), another worker's
                continue
            key = [label, str(index)]
            size.add_metric(key, sum(p.size_bytes for p in chain))
            lets.add_metric(key, len(chain))
            start.add_metric(key, partition.log_start_offset)
            end.add_metric(key, partition.high_watermark)
            per_volume.update(p.volume for p in chain)
            count += 1
    volumes = GaugeMetricFamily("kafkacompat_volume_partitionlets",
                                "partitionlets on each volume, of the topics with their own series", labels=["volume"])
    for volume, n in sorted(per_volume.items()):
        volumes.add_metric([volume], n)
    return [size, lets, start, end, volumes]


async def _lag(cluster: "Cluster") -> list[Metric]:
    """Per (group, topic, partition): end offset minus the committed offset, as kafka-consumer-groups shows it.

    One pass over the cursors of each stream holding a topic with series.
    """
    lag = GaugeMetricFamily("kafkacompat_consumer_group_lag",
                            "records between a group's committed offset and the partition's end",
                            labels=["group", "topic", "partition"])
    store = cluster.store
    by_stream: dict[str, dict[str, tuple[str, storage.TopicInfo]]] = collections.defaultdict(dict)
    for label, info in _series_topics(cluster):
        by_stream[info.stream][info.name] = (label, info)
    rows = []
    for stream, topics in sorted(by_stream.items()):
        for group in store.list_cursor_groups(stream):
            for cursor in store.get_cursors(stream, group):
                found = topics.get(cursor.topic)
                if found is not None and cursor.partition < found[1].partitions:
                    rows.append((group, found[0], cursor.partition, cursor.offset, found[1]))
    rows.sort(key=lambda row: row[:3])
    if len(rows) > SERIES_MAX and _capped("kafkacompat_consumer_group_lag", SERIES_MAX):
        del rows[SERIES_MAX:]
    ends = await cluster.partition_figures(sorted({(info.stream, info.name, index) for _, _, index, _, info in rows}),
                                           partitionlets=False)  # another worker's asked of it once for all
    for group, label, index, offset, info in rows:
        end = ends[info.stream, info.name, index]
        if isinstance(end, storage.StorageError):  # deleted meanwhile, unreadable, or its worker restarting
            continue
        lag.add_metric([group, label, str(index)], max(end.high_watermark - offset, 0))
    return [lag]
