"""/metrics in the Prometheus text format, from the broker's own figures.

A registry per scrape (two brokers in one process do not clash) with one
collector that reads RequestStats, the store and the server when scraped:
serving a request costs only the dict updates of RequestStats. With `serve
--workers N`, worker 0 (the one serving HTTP) asks each other worker for
its figures (WorkerState metrics.read) and labels every series with the
node id of the worker it came from. On a broker with an authorizer a scrape needs DESCRIBE on the cluster (the
figures name topics, groups and sizes): 403 otherwise, with an audit line.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from kafkacompat.protocol.versions import api_name

from ..broker.request_stats import LATENCY_BUCKETS
from ..security.acls import Operation
from . import metrics_detail
from .common import BROKER
from .principal import caller

if TYPE_CHECKING:
    from .common import ServedBroker


@functools.cache
def request_name(api_key: int) -> str:
    """Kafka's own name of a request, as its RequestMetrics label it: Produce, ApiVersions, ..."""
    return "".join(word.capitalize() for word in api_name(api_key).split("_"))


class BrokerCollector:
    """Turns one broker's figures into metric families at scrape time."""

    def __init__(self, broker: "ServedBroker") -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        cluster = self._broker.cluster
        yield GaugeMetricFamily("kafkacompat_open_connections", "Kafka client connections open now",
                                value=self._broker.connection_count)
        if cluster is None:  # the store is not open (yet, or any more)
            return
        stats = cluster.stats
        requests = CounterMetricFamily("kafkacompat_requests", "Kafka requests answered, per API and version",
                                       labels=["api_key", "api", "version"])
        for (key, version), count in sorted(stats.requests.items()):
            requests.add_metric([str(key), request_name(key), str(version)], count)
        yield requests
        errors = CounterMetricFamily("kafkacompat_request_errors",
                                     "partitions answered with a Kafka error code, per API, version and error",
                                     labels=["api_key", "api", "version", "error"])
        for (key, version, error), count in sorted(stats.errors.items()):
            errors.add_metric([str(key), request_name(key), str(version), error.upper()], count)
        yield errors
        latency = HistogramMetricFamily("kafkacompat_request_latency_seconds",
                                        "time from a request's last byte read to its answer written, per API",
                                        labels=["api_key", "api"])
        for key, counts in sorted(stats.latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), counts.buckets):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric([str(key), request_name(key)], buckets, counts.total)
        yield latency
        yield CounterMetricFamily("kafkacompat_bytes_in", "record batch bytes appended by Produce",
                                  value=stats.bytes_in)
        yield CounterMetricFamily("kafkacompat_messages_in", "records appended by Produce", value=stats.messages_in)
        yield CounterMetricFamily("kafkacompat_bytes_out", "record batch bytes sent by Fetch", value=stats.bytes_out)
        yield CounterMetricFamily("kafkacompat_messages_out", "records in the whole batches sent by Fetch",
                                  value=stats.messages_out)
        if stats.topic_series:
            for name, help_text, counter in (
                ("kafkacompat_topic_bytes_in", "record batch bytes appended, per topic", stats.topic_bytes_in),
                ("kafkacompat_topic_messages_in", "records appended, per topic", stats.topic_messages_in),
                ("kafkacompat_topic_bytes_out", "record batch bytes fetched, per topic", stats.topic_bytes_out),
                ("kafkacompat_topic_messages_out", "records in the batches fetched, per topic", stats.topic_messages_out),
            ):
                family = CounterMetricFamily(name, help_text + " (first metrics_topic_series topics, the rest "
                                             "under topic=\"_other\")", labels=["topic"])
                for topic, count in sorted(counter.items()):
                    family.add_metric([topic], count)
                yield family
        topics = cluster.store.list_topics()
        yield GaugeMetricFamily("kafkacompat_topics", "topics in all streams", value=len(topics))
        yield GaugeMetricFamily("kafkacompat_partitions", "partitions in all streams",
                                value=sum(info.partitions for info in topics))
        yield GaugeMetricFamily("kafkacompat_producer_states",
                                "idempotent producer states kept (one per producer id and partition)",
                                value=len(cluster.producers))
        free = GaugeMetricFamily("kafkacompat_volume_free_bytes",
                                 "bytes a volume can still take (its cap or the file system's free space)",
                                 labels=["volume"])
        for volume in getattr(cluster.store, "volumes", ()):  # a memory store has none
            free.add_metric([volume.path], volume.free_bytes())
        yield free


async def serve_metrics(request: web.Request) -> web.Response:
    """The broker's figures; with `serve --workers N`, every worker's, each series labelled with its
    worker's node id (before stop 56 worker 0's alone)."""
    broker = request.app[BROKER]
    cluster = broker.cluster
    if cluster is not None and cluster.authorizer.enabled:
        who = caller(request)
        if not cluster.authorizer.cluster(who, Operation.DESCRIBE):
            return web.json_response({"error_code": 40301, "message": f"{who.principal} may not read the metrics "
                                      "(needs DESCRIBE on the cluster)"}, status=403)
    body = await exposition(broker)
    peers = await cluster.view.ask_peers({"op": "metrics.read"}, "metrics") if cluster is not None else {}
    if peers:
        body = labelled({cluster.node_id: body, **{node: answer["text"].encode() for node, answer in peers.items()}})
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def exposition(broker: "ServedBroker", lag: bool = True) -> bytes:
    """The broker's figures in the Prometheus text format, then those that need the store's async reads
    (metrics_detail; `lag`: with the group lag)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    detail = await metrics_detail.families(broker, lag)
    return generate_latest(registry) + generate_latest(detail)  # type: ignore[arg-type]


def labelled(texts: dict[int, bytes]) -> bytes:
    """Several brokers' figures as one text: each family once, each series labelled `node_id`, as a
    Prometheus server that scraped each broker labels them by instance."""
    merged: dict[str, Metric] = {}
    for node_id, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text.decode()):
            into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            into.samples += [sample._replace(labels={**sample.labels, "node_id": str(node_id)})
                             for sample in family.samples]
    return generate_latest(metrics_detail.Families(list(merged.values())))  # type: ignore[arg-type]


def add_routes(app: web.Application) -> None:
    app.router.add_get("/metrics", serve_metrics)
