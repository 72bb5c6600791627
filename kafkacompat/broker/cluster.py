"""What every handler reads: this broker's identity, the store and topic lookup."""

from __future__ import annotations

import dataclasses
import logging
import uuid

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.storage import Store, TopicInfo

from ..config import BrokerConfig
from ..groups import GroupCoordinator
from .producer_state import ProducerStates
from .request_stats import RequestStats
from .topic_names import LEGAL_NAMES_ONLY, TopicNameError, canonical_name, kafka_alias, split_name

log = logging.getLogger(__name__)
_SPLITS_KEPT = 10_000  # remembered topic-name splits (cleared when full)


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedTopic:
    stream: str
    topic: str
    info: TopicInfo | None  # None when it does not exist


class TopicError(Exception):
    """A topic lookup that must be answered with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class Cluster:
    def __init__(self, config: BrokerConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        self.host, self.port = config.advertised()
        self.producers = ProducerStates(config.producer_id_expiration_ms)
        self._splits: dict[str, tuple[str, str]] = {}
        self.groups = GroupCoordinator(config, store)
        self.stats = RequestStats(config.metrics_topic_series)  # read by /metrics

    @property
    def default_stream(self) -> str:
        return self.store.default_stream

    def split(self, name: str) -> tuple[str, str]:
        """(stream, topic) for a Kafka topic name, or TopicError(INVALID_TOPIC_EXCEPTION).

        Valid names are remembered: every produced and fetched partition asks.
        """
        known = self._splits.get(name)
        if known is not None:
            return known
        try:
            stream, topic = split_name(name, self.default_stream)
            storage.names.check_stream_path(stream)
            storage.names.check_topic_name(topic)
        except (TopicNameError, storage.StorageError) as exc:
            raise TopicError(ErrorCode.invalid_topic_exception, str(exc)) from None
        if stream == self.default_stream and ".." in topic:
            raise TopicError(
                ErrorCode.invalid_topic_exception,
                f"{name!r}: '..' is reserved for stream aliases (path..topic)",
            )
        if len(self._splits) >= _SPLITS_KEPT:
            self._splits.clear()
        self._splits[name] = (stream, topic)
        return stream, topic

    def lookup(self, name: str) -> ResolvedTopic:
        stream, topic = self.split(name)
        return ResolvedTopic(stream, topic, self.store.get_topic(stream, topic))

    def topic_for(self, name: str) -> tuple[TopicInfo | None, ErrorCode]:
        """The topic, or None and the code to answer for each of its partitions."""
        try:
            info = self.lookup(name).info
        except TopicError as exc:
            return None, exc.code
        return info, ErrorCode.none if info else ErrorCode.unknown_topic_or_partition

    def partition_for(
        self, info: TopicInfo | None, missing: ErrorCode, index: int
    ) -> tuple[storage.Partition | None, ErrorCode]:
        """The partition of a looked-up topic, or None and the code to answer."""
        if info is None:
            return None, missing
        if not 0 <= index < info.partitions:
            return None, ErrorCode.unknown_topic_or_partition
        try:
            return self.store.partition(info.stream, info.name, index), ErrorCode.none
        except storage.UnknownTopicError:
            return None, ErrorCode.unknown_topic_or_partition
        except storage.StorageError:  # damaged or unreadable files: logged once by the store
            return None, ErrorCode.kafka_storage_error

    def display_name(self, info: TopicInfo, client_software_name: str = "") -> str:
        """The name a topic is listed under: canonical, or the Kafka-legal alias
        for a client that cannot take anything else (see LEGAL_NAMES_ONLY)."""
        if client_software_name in LEGAL_NAMES_ONLY:
            return kafka_alias(info.stream, info.name, self.default_stream)
        return canonical_name(info.stream, info.name, self.default_stream)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.store.get_topic_by_id(topic_id)

    async def auto_create(self, name: str) -> TopicInfo:
        """Create a topic on first use, as the stream's autocreate policy allows."""
        stream, topic = self.split(name)
        existing = self.store.get_topic(stream, topic)
        if existing is not None:
            return existing
        info = self.store.get_stream(stream)
        if info is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition, f"stream {stream} does not exist"
            )
        allowed = info.policy.autocreate and (
            stream != self.default_stream or self.config.auto_create_topics
        )
        if not allowed:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {name} does not exist and stream {stream} does not auto-create topics",
            )
        try:
            created = await self.store.create_topic(stream, topic, info.policy.default_partitions)
        except storage.TopicExistsError:
            created = self.store.get_topic(stream, topic)
            assert created is not None
        log.info("auto-created topic %s with %d partition(s)", name, created.partitions)
        return created
