"""Figures the broker gathers while serving, read by the /metrics endpoint.

Plain integers in dicts, bumped inline by the connection layer and the
produce and fetch handlers: a request costs a few dict updates and no lock
(everything runs on the broker's event loop). kafkacompat.http.metrics turns
them into Prometheus series only when scraped.

Cardinality: request series are per API key and version (bounded by the
protocol); per-topic byte and message series exist only for the first
`metrics_topic_series` topics seen (0 by default), later topics are counted
under the topic "_other", so a million topics never make a million series.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

# seconds; Kafka's request latencies run from sub-millisecond to a fetch's max.wait.ms
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OTHER_TOPICS = "_other"
# per-topic traffic totals for the console's charts: a few ints per topic, for at most this many topics
TOPIC_TOTALS_MAX = 100_000


_NESTED_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def response_errors(body: Any) -> Iterator[str]:
    """The names of the non-zero error codes anywhere in a decoded (kio) response, e.g. "topic_already_exists".

    An error code is a field named error_code or ending in it (AddPartitionsToTxn's
    partition_error_code, ShareFetch's acknowledge_error_code, CreateTopics'
    topic_config_error_code). Field lists are cached per type; only fields that
    can hold an error code or nested entries are visited. Produce and Fetch answers are encoded by
    their handlers (bytes), which count their errors themselves.
    """
    for name, is_code in _fields_of(type(body)):
        value = getattr(body, name)
        if is_code:
            if value:
                yield getattr(value, "name", str(value))
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from response_errors(item)
        elif value is not None and dataclasses.is_dataclass(value):
            yield from response_errors(value)


def _fields_of(kind: type) -> tuple[tuple[str, bool], ...]:
    """(name, is it the error code) of the fields of `kind` worth visiting."""
    fields = _NESTED_FIELDS.get(kind)
    if fields is None:
        fields = _NESTED_FIELDS[kind] = tuple(
            (f.name, f.name.endswith("error_code")) for f in dataclasses.fields(kind)
            if f.name.endswith("error_code") or any(dataclasses.is_dataclass(t) for t in (f.type, *typing.get_args(f.type)))
        )
    return fields


class LatencyCounts:
    """One API's request latency as histogram bucket counts (not cumulative) and their sum."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last is +Inf
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds


class RequestStats:
    """Counters of requests, errors, latency and traffic for one broker."""

    def __init__(self, topic_series: int = 0) -> None:
        self.topic_series = topic_series
        self.requests: collections.Counter[tuple[int, int]] = collections.Counter()  # (api key, version)
        self.errors: collections.Counter[tuple[int, int, str]] = collections.Counter()  # (+ error name)
        self.latency: dict[int, LatencyCounts] = {}
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.messages_out = 0
        self.topic_bytes_in: collections.Counter[str] = collections.Counter()
        self.topic_messages_in: collections.Counter[str] = collections.Counter()
        self.topic_bytes_out: collections.Counter[str] = collections.Counter()
        self.topic_messages_out: collections.Counter[str] = collections.Counter()
        self._topics: set[str] = set()
        # topic as the client named it -> [messages in, bytes in, messages out, bytes out] (console charts)
        self.topic_totals: dict[str, list[int]] = {}

    def request_done(self, api_key: int, version: int, seconds: float) -> None:
        """A request was answered (or, acks=0, handled) `seconds` after its frame was read."""
        self.requests[api_key, version] += 1
        counts = self.latency.get(api_key)
        if counts is None:
            counts = self.latency[api_key] = LatencyCounts()
        counts.observe(seconds)

    def error(self, api_key: int, version: int, error: str) -> None:
        """A partition (or the whole request) was answered with a Kafka error code."""
        self.errors[api_key, version, error] += 1

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        self.messages_in += messages
        self.bytes_in += nbytes
        totals = self._totals(topic)
        if totals is not None:
            totals[0] += messages
            totals[1] += nbytes
        if self.topic_series:
            label = self._label(topic)
            self.topic_messages_in[label] += messages
            self.topic_bytes_in[label] += nbytes

    def fetched(self, topic: str, nbytes: int, messages: int) -> None:
        """A Fetch sent `nbytes` of whole batches holding `messages` records (from each batch's start)."""
        self.bytes_out += nbytes
        self.messages_out += messages
        totals = self._totals(topic)
        if totals is not None:
            totals[2] += messages
            totals[3] += nbytes
        if self.topic_series:
            label = self._label(topic)
            self.topic_bytes_out[label] += nbytes
            self.topic_messages_out[label] += messages

    @property
    def series_topics(self) -> frozenset[str]:
        """The topics (as clients named them) that have their own series: at most `topic_series` of them."""
        return frozenset(self._topics)

    def _totals(self, topic: str) -> list[int] | None:
        totals = self.topic_totals.get(topic)
        if totals is None and len(self.topic_totals) < TOPIC_TOTALS_MAX:
            totals = self.topic_totals[topic] = [0, 0, 0, 0]
        return totals

    def _label(self, topic: str) -> str:
        if topic in self._topics:
            return topic
        if len(self._topics) < self.topic_series:
            self._topics.add(topic)
            return topic
        return OTHER_TOPICS
