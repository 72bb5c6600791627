"""Engine-independent namespace logic: streams, topics, cursors in memory.

Both engines keep the whole namespace in memory (it is small per topic) and
differ only in how they persist it and how partitions hold their bytes, so
the rules (naming, nesting, growth-only partitions, policy checks) live here
once. Engines override the `_persist_*` hooks and `_new_partition`.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from .activity import StoreActivity
from .api import Cursor, FsyncPolicy, NewTopic, Partition, StateFence, Store, StreamInfo, StreamPolicy, TopicInfo
from .errors import (
    InvalidPartitionsError,
    InvalidPathError,
    InvalidPolicyError,
    StorageError,
    StreamExistsError,
    TopicExistsError,
    UnknownStreamError,
    UnknownTopicError,
)
from .names import check_stream_path, check_topic_name

# Topic configs the store honours as per-topic overrides of the stream policy.
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
CLEANUP_POLICY = "cleanup.policy"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
DELETE_RETENTION_MS = "delete.retention.ms"
_INT_CONFIGS = (RETENTION_MS, RETENTION_BYTES, SEGMENT_BYTES, SEGMENT_MS, MIN_COMPACTION_LAG_MS,
                MAX_COMPACTION_LAG_MS, DELETE_RETENTION_MS)
MIN_PARTITIONLET_BYTES = 4096
LONG_MAX = 2**63 - 1
# Kafka's defaults for the compaction settings
DEFAULT_DIRTY_RATIO = 0.5
DEFAULT_DELETE_RETENTION_MS = 86_400_000


def cleanup_policy(text: str) -> str:
    """Kafka's cleanup.policy list without spaces or repeats, in the order given (as Kafka shows it), or ''
    (neither: as on Kafka, an empty list deletes nothing by retention and compacts nothing).

    InvalidPolicyError for a name other than compact and delete.
    """
    names = list(dict.fromkeys(part.strip() for part in str(text).split(",") if part.strip()))
    if not set(names) <= {"compact", "delete"}:
        wrong = next(name for name in names if name not in ("compact", "delete"))
        raise InvalidPolicyError(f"Invalid value {wrong} for configuration cleanup.policy: String must be one of: "
                                 "compact, delete")
    return ",".join(names)


_TABLE_NAME = re.compile(r"[a-z_]+")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """A partition's effective rules: stream policy with topic overrides applied."""

    ttl_ms: int  # Kafka's retention.ms: -1 keeps forever, 0 expires every record older than now
    retention_bytes: int  # -1 no cap
    partitionlet_bytes: int
    partitionlet_age_ms: int
    fsync: FsyncPolicy
    fsync_interval_ms: int
    delete: bool = True  # cleanup.policy has delete: ttl and size cap apply
    compact: bool = False  # cleanup.policy has compact: the cleaner keeps the last record per key
    min_cleanable_dirty_ratio: float = DEFAULT_DIRTY_RATIO
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS

    @property
    def retains(self) -> bool:
        """Whether retention deletes anything: cleanup.policy has delete and a ttl or size cap is set."""
        return self.delete and (self.ttl_ms >= 0 or self.retention_bytes >= 0)


def check_policy(policy: StreamPolicy) -> StreamPolicy:
    """Return the policy with its fsync field normalised, or raise InvalidPolicyError."""
    try:
        fsync = FsyncPolicy(policy.fsync)
    except ValueError:
        raise InvalidPolicyError(f"fsync policy {policy.fsync!r} is not one of none, interval, always") from None
    problems = []
    if policy.ttl_seconds < 0:
        problems.append("ttl_seconds must be >= 0 (0 keeps forever)")
    if policy.default_partitions < 1:
        problems.append("default_partitions must be >= 1")
    if policy.fsync_interval_ms < 1:
        problems.append("fsync_interval_ms must be >= 1")
    if policy.partitionlet_bytes < MIN_PARTITIONLET_BYTES:
        problems.append(f"partitionlet_bytes must be >= {MIN_PARTITIONLET_BYTES}")
    if policy.partitionlet_age_ms < 1:
        problems.append("partitionlet_age_ms must be >= 1")
    if policy.retention_bytes < -1:
        problems.append("retention_bytes must be -1 (no cap) or >= 0")
    try:
        cleanup = cleanup_policy(policy.cleanup_policy)
    except InvalidPolicyError as exc:
        problems.append(str(exc))
        cleanup = policy.cleanup_policy
    if problems:
        raise InvalidPolicyError("; ".join(problems))
    return dataclasses.replace(policy, fsync=fsync, cleanup_policy=cleanup)


def check_topic_configs(configs: dict[str, str]) -> dict[str, str]:
    """Copy the configs, checking the overrides the store itself interprets."""
    out = {str(k): str(v) for k, v in configs.items()}
    for key in _INT_CONFIGS:
        if key in out:
            try:
                int(out[key])
            except ValueError:
                raise InvalidPolicyError(f"topic config {key}={out[key]!r} is not an integer") from None
    if SEGMENT_BYTES in out and int(out[SEGMENT_BYTES]) < MIN_PARTITIONLET_BYTES:
        raise InvalidPolicyError(f"{SEGMENT_BYTES} must be >= {MIN_PARTITIONLET_BYTES}")
    if CLEANUP_POLICY in out:
        out[CLEANUP_POLICY] = cleanup_policy(out[CLEANUP_POLICY])
    if MIN_CLEANABLE_DIRTY_RATIO in out:
        try:
            ratio = float(out[MIN_CLEANABLE_DIRTY_RATIO])
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:
            raise InvalidPolicyError(f"{MIN_CLEANABLE_DIRTY_RATIO}={out[MIN_CLEANABLE_DIRTY_RATIO]!r} must be in [0, 1]")
    return out


class TopicState:
    """A topic as the store holds it: its info plus lazily opened partitions.

    A topic loaded from disk keeps its raw catalog fields until its
    TopicInfo is first needed: building a million TopicInfo objects (and
    their UUIDs) is most of the cost of opening a large namespace.
    """

    __slots__ = ("stream", "name", "id_hex", "_info", "_raw", "partitions", "_settings")

    def __init__(
        self, stream: StreamState, info: TopicInfo | None = None, *,
        raw: tuple[str, str, int, dict[str, str], int] | None = None,
    ) -> None:
        self.stream = stream
        self._info = info
        self._raw = raw  # (name, id hex, partitions, configs, created ms)
        if info is not None:
            self.name, self.id_hex = info.name, info.topic_id.hex
        else:
            self.name, self.id_hex = raw[0], raw[1]
        self.partitions: dict[int, Partition] | None = None
        self._settings: Settings | None = None

    @property
    def info(self) -> TopicInfo:
        if self._info is None:
            name, id_hex, partitions, configs, created_ms = self._raw
            self._info = TopicInfo(self.stream.path, name, uuid.UUID(id_hex), partitions, configs, created_ms)
            self._raw = None
        return self._info

    @info.setter
    def info(self, info: TopicInfo) -> None:
        self._info, self._raw = info, None

    @property
    def partition_total(self) -> int:
        """How many partitions the topic has, without building its TopicInfo."""
        return self._raw[2] if self._info is None else self._info.partitions

    @property
    def configs(self) -> dict[str, str]:
        return self._raw[3] if self._info is None else self._info.configs

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            policy = self.stream.policy
            configs = self.configs
            # a stream's ttl 0 keeps forever (MapR's meaning); a topic's retention.ms keeps Kafka's:
            # any negative value keeps forever, 0 lets the next retention pass delete every record
            ttl_ms = policy.ttl_seconds * 1000 if policy.ttl_seconds > 0 else -1
            cleanup = configs.get(CLEANUP_POLICY, policy.cleanup_policy)
            if RETENTION_MS in configs:
                ttl_ms = max(int(configs[RETENTION_MS]), -1)
            compact = "compact" in cleanup
            max_lag_ms = int(configs.get(MAX_COMPACTION_LAG_MS, LONG_MAX))
            age_ms = max(int(configs.get(SEGMENT_MS, policy.partitionlet_age_ms)), 1)
            if compact:  # as Kafka's maxSegmentMs: the active partitionlet must not outlive the lag
                age_ms = max(min(age_ms, max_lag_ms), 1)
            self._settings = Settings(
                ttl_ms=ttl_ms,
                retention_bytes=int(configs.get(RETENTION_BYTES, policy.retention_bytes)),
                partitionlet_bytes=int(configs.get(SEGMENT_BYTES, policy.partitionlet_bytes)),
                partitionlet_age_ms=age_ms,
                fsync=policy.fsync,
                fsync_interval_ms=policy.fsync_interval_ms,
                delete="delete" in cleanup,
                compact=compact,
                min_cleanable_dirty_ratio=float(configs.get(MIN_CLEANABLE_DIRTY_RATIO, DEFAULT_DIRTY_RATIO)),
                min_compaction_lag_ms=int(configs.get(MIN_COMPACTION_LAG_MS, 0)),
                max_compaction_lag_ms=max_lag_ms,
                delete_retention_ms=int(configs.get(DELETE_RETENTION_MS, DEFAULT_DELETE_RETENTION_MS)),
            )
        return self._settings

    def forget_settings(self) -> None:
        self._settings = None


K = TypeVar("K")
V = TypeVar("V")
_CHANGES = itertools.count(1)  # stamps of ChangeStamped tables: a later change always has a greater one


class ChangeStamped(dict[K, V]):
    """A dict stamped with a fresh process-wide number at every change of its keys or values.

    The streams of a store and each stream's topics are kept in these, so
    the greatest stamp among them (topics_changed) moves whenever a topic
    or stream comes or goes, whichever path changed it, and a view built
    over every topic (DescribeTopicPartitions' name order) knows it is
    stale without walking them.
    """

    __slots__ = ("changed",)

    def __init__(self) -> None:
        super().__init__()
        self.changed = next(_CHANGES)

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.changed = next(_CHANGES)

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self.changed = next(_CHANGES)

    def pop(self, key: K, *default: Any) -> Any:
        self.changed = next(_CHANGES)
        return super().pop(key, *default)

    def popitem(self) -> tuple[K, V]:
        self.changed = next(_CHANGES)
        return super().popitem()

    def setdefault(self, key: K, default: Any = None) -> Any:
        self.changed = next(_CHANGES)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self.changed = next(_CHANGES)

    def clear(self) -> None:
        super().clear()
        self.changed = next(_CHANGES)


class StreamState:
    __slots__ = ("path", "policy", "created_ms", "topics", "cursors", "tables", "table_versions")

    def __init__(self, path: str, policy: StreamPolicy, created_ms: int) -> None:
        self.path = path
        self.policy = policy
        self.created_ms = created_ms
        self.topics: ChangeStamped[str, TopicState] = ChangeStamped()
        self.cursors: dict[str, dict[tuple[str, int], Cursor]] = {}
        self.tables: dict[str, dict[str, dict]] = {}  # state tables (put_state)
        self.table_versions: dict[str, int] = {}  # goes up with every change of a table (state_version)

    def replace_table(self, table: str, rows: dict[str, dict]) -> None:
        """A state table as read afresh from where another process writes it too."""
        self.tables[table] = rows
        self.table_changed(table)

    def table_changed(self, table: str) -> None:
        self.table_versions[table] = self.table_versions.get(table, 0) + 1

    def info(self) -> StreamInfo:
        return StreamInfo(self.path, self.policy, self.created_ms, len(self.topics))


class NamespaceStore(Store):
    """Store methods common to every engine; persistence is left to hooks."""

    # True in engines that keep a running partition count exact: every change of their topics goes
    # through this class's methods, or (an engine shared by processes, learning of the others'
    # topics by other paths) those paths count too. False: every count walks every topic.
    counts_partitions = False

    def __init__(self, default_stream: str = "/default") -> None:
        self.default_stream = check_stream_path(default_stream)
        self._streams: ChangeStamped[str, StreamState] = ChangeStamped()
        self._topics_by_id: dict[str, TopicState] = {}  # by topic id in hex
        self.store_id = uuid.uuid4()  # engines that persist replace it with the stored one on open
        self._settings: dict[str, str] = {}
        self._settings_version = 0  # goes up with every change of the settings (settings_version)
        self.activity = StoreActivity()  # fsync and retention counts, read by the broker's /metrics
        self._partitions: int | None = None  # the running count, once first walked (counts_partitions)
        self.partition_walks = 0  # walks over every topic to count partitions: once per open when counted

    def settings(self) -> dict[str, str]:
        return dict(self._settings)

    def settings_version(self) -> int:
        return self._settings_version

    def _take_settings(self, settings: dict[str, str]) -> None:
        """The settings as set here, or as read afresh from where other processes set them too."""
        if settings != self._settings:
            self._settings = settings
            self._settings_version += 1

    async def set_settings(self, changes: Mapping[str, str | None]) -> dict[str, str]:
        updated = dict(self._settings)
        for key, value in changes.items():
            if value is None:
                updated.pop(key, None)
            else:
                updated[key] = value
        await self._persist_settings(updated)
        self._take_settings(updated)
        return dict(updated)

    # hooks -----------------------------------------------------------------

    @abc.abstractmethod
    async def _persist_settings(self, settings: dict[str, str]) -> None:
        """Record the store-wide settings (all of them)."""

    @abc.abstractmethod
    async def _persist_stream(self, stream: StreamState, created: bool) -> None: ...

    @abc.abstractmethod
    async def _persist_stream_deleted(self, stream: StreamState) -> None: ...

    @abc.abstractmethod
    async def _persist_topics(self, stream: StreamState, topics: Sequence[TopicState]) -> None:
        """Record created or changed topics."""

    @abc.abstractmethod
    async def _persist_topic_deleted(self, stream: StreamState, topic: TopicState) -> None: ...

    @abc.abstractmethod
    async def _persist_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]]
    ) -> None: ...

    def _follow_cursors(self, stream: StreamState) -> bool:
        """Bring the stream's cursors up to date with what other processes wrote (a store several
        worker processes write: each coordinator writes its own groups' cursors); True when the
        store keeps them so, its writes included (the namespace then leaves them as they are).
        A store only this process writes is always current: False."""
        return False

    def _follow_table(self, stream: StreamState, table: str) -> bool:
        """_follow_cursors for a state table."""
        return False

    async def _persist_fenced_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]],
        fence: StateFence,
    ) -> None:
        """_persist_cursors under a leader epoch; only a store other processes write has epochs to check."""
        await self._persist_cursors(stream, group, cursors, deleted)

    @abc.abstractmethod
    async def _persist_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool
    ) -> None: ...

    async def _persist_fenced_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool, fence: StateFence
    ) -> None:
        """_persist_state under a leader epoch; only a store other processes write has epochs to check."""
        await self._persist_state(stream, table, records, durable)

    @abc.abstractmethod
    async def _purge_topic(self, stream: StreamState, topic: TopicState) -> None:
        """Drop every message of the topic's partitions, keeping their offsets."""

    @abc.abstractmethod
    def _new_partition(self, topic: TopicState, index: int) -> Partition: ...

    # helpers ---------------------------------------------------------------

    def _stream(self, path: str) -> StreamState:
        state = self._streams.get(path)
        if state is None:
            raise UnknownStreamError(f"stream {path!r} does not exist")
        return state

    def _topic(self, stream: str, name: str) -> TopicState:
        topic = self._stream(stream).topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"topic {name!r} does not exist in stream {stream!r}")
        return topic

    def _check_not_nested(self, path: str) -> None:
        prefix = path + "/"
        for other in self._streams:
            if other.startswith(prefix) or path.startswith(other + "/"):
                raise InvalidPathError(
                    f"stream {path!r} cannot be created: streams may not nest, and {other!r} exists"
                )

    def _add_loaded_stream(self, stream: StreamState) -> None:
        self._streams[stream.path] = stream

    def _register_topic(self, stream: StreamState, topic: TopicState) -> None:
        stream.topics[topic.name] = topic
        self._topics_by_id[topic.id_hex] = topic
        self._count_partitions(topic.partition_total)

    def _count_partitions(self, change: int) -> None:
        if self._partitions is not None:
            self._partitions += change

    def topics_changed(self) -> int:
        return max(self._streams.changed, max((s.topics.changed for s in self._streams.values()), default=0))

    def partition_count(self) -> int:
        if self._partitions is not None:
            return self._partitions
        self.partition_walks += 1
        total = sum(t.partition_total for s in self._streams.values() for t in s.topics.values())
        if self.counts_partitions:
            self._partitions = total
        return total

    async def _ensure_default_stream(self) -> None:
        if self.default_stream not in self._streams:
            await self.create_stream(self.default_stream, StreamPolicy(autocreate=True))

    def _opened_partitions(self, streams: Iterable[StreamState] | None = None) -> Iterable[Partition]:
        for stream in list(self._streams.values()) if streams is None else streams:
            for topic in list(stream.topics.values()):
                if topic.partitions:
                    yield from list(topic.partitions.values())

    # streams ---------------------------------------------------------------

    async def create_stream(self, path: str, policy: StreamPolicy = StreamPolicy()) -> StreamInfo:
        check_stream_path(path)
        policy = check_policy(policy)
        if path in self._streams:
            raise StreamExistsError(f"stream {path!r} already exists")
        self._check_not_nested(path)
        state = StreamState(path, policy, now_ms())
        self._streams[path] = state  # before the await, so concurrent creates conflict
        try:
            await self._persist_stream(state, created=True)
        except BaseException:
            del self._streams[path]
            raise
        return state.info()

    async def edit_stream(self, path: str, policy: StreamPolicy) -> StreamInfo:
        state = self._stream(path)
        new_policy = check_policy(policy)
        old_policy = state.policy
        state.policy = new_policy
        try:
            await self._persist_stream(state, created=False)
        except BaseException:
            state.policy = old_policy
            raise
        for topic in state.topics.values():
            topic.forget_settings()
        return state.info()

    def get_stream(self, path: str) -> StreamInfo | None:
        state = self._streams.get(path)
        return None if state is None else state.info()

    def list_streams(self) -> list[StreamInfo]:
        return [s.info() for s in sorted(self._streams.values(), key=lambda s: s.path)]

    async def delete_stream(self, path: str) -> None:
        state = self._stream(path)
        if path == self.default_stream:
            raise InvalidPathError(f"the default stream {path!r} cannot be deleted (purge it instead)")
        del self._streams[path]
        for topic in state.topics.values():
            self._topics_by_id.pop(topic.id_hex, None)
            self._count_partitions(-topic.partition_total)
        await self._persist_stream_deleted(state)

    async def purge_stream(self, path: str) -> None:
        state = self._stream(path)
        for topic in list(state.topics.values()):
            await self._purge_topic(state, topic)
        groups = list(self._cursors_of(path))
        for group in groups:
            await self.delete_cursors(path, group)

    # topics ----------------------------------------------------------------

    async def create_topic(
        self, stream: str, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> TopicInfo:
        state = self._stream(stream)
        topic = self._new_topic(state, name, partitions, configs)
        # registered before the await so concurrent creates of one name conflict
        self._register_topic(state, topic)
        try:
            await self._persist_topics(state, [topic])
        except BaseException:
            self._unregister_topics(state, [topic])
            raise
        return topic.info

    async def create_topics(self, stream: str, topics: Sequence[NewTopic]) -> list[TopicInfo | StorageError]:
        """Each topic checked and registered as create_topic does, then all written by one
        _persist_topics. If that write fails, none is kept; if it fails because another process
        took one of the names first (a store shared by brokers), each is written alone, so only
        that one is refused."""
        state = self._stream(stream)
        outcomes: list[TopicInfo | StorageError] = []
        made: list[TopicState] = []
        for new in topics:
            try:
                topic = self._new_topic(state, new.name, new.partitions, new.configs)
            except StorageError as exc:
                outcomes.append(exc)
                continue
            self._register_topic(state, topic)
            made.append(topic)
            outcomes.append(topic.info)
        if not made:
            return outcomes
        try:
            await self._persist_topics(state, made)
        except TopicExistsError:
            self._unregister_topics(state, made)
            return [await self._create_alone(stream, o) if isinstance(o, TopicInfo) else o for o in outcomes]
        except BaseException as exc:
            self._unregister_topics(state, made)
            if not isinstance(exc, StorageError):
                raise
            return [exc if isinstance(o, TopicInfo) else o for o in outcomes]
        return outcomes

    async def _create_alone(self, stream: str, info: TopicInfo) -> TopicInfo | StorageError:
        try:
            return await self.create_topic(stream, info.name, info.partitions, info.configs)
        except StorageError as exc:
            return exc

    def _new_topic(self, state: StreamState, name: str, partitions: int, configs: dict[str, str] | None) -> TopicState:
        check_topic_name(name)
        if partitions < 1:
            raise InvalidPartitionsError(f"topic {name!r} needs at least one partition, not {partitions}")
        if name in state.topics:
            raise TopicExistsError(f"topic {name!r} already exists in stream {state.path!r}")
        info = TopicInfo(state.path, name, uuid.uuid4(), partitions, check_topic_configs(configs or {}), now_ms())
        return TopicState(state, info)

    def _unregister_topics(self, state: StreamState, topics: Sequence[TopicState]) -> None:
        """Undo only these registrations: on a store shared by processes the winner's topic may
        have replaced one meanwhile (its notification), and stays."""
        for topic in topics:
            if state.topics.get(topic.name) is topic:
                del state.topics[topic.name]
                self._count_partitions(-topic.partition_total)
            self._topics_by_id.pop(topic.id_hex, None)

    def get_topic(self, stream: str, name: str) -> TopicInfo | None:
        state = self._streams.get(stream)
        if state is None:
            return None
        topic = state.topics.get(name)
        return None if topic is None else topic.info

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        topic = self._topics_by_id.get(topic_id.hex)
        return None if topic is None else topic.info

    def list_topics(self, stream: str | None = None) -> list[TopicInfo]:
        if stream is None:
            return list(self.iter_topics())
        return [t.info for t in self._stream(stream).topics.values()]

    def iter_topics(self) -> Iterator[TopicInfo]:
        """The topics as they are now, each info built as it is reached: a store opened from disk holds
        its topics raw until asked, and building a million infos at once (list_topics) held the event
        loop 5 s in the first Metadata for all topics after a restart."""
        topics = [t for s in self._streams.values() for t in s.topics.values()]
        return (t.info for t in topics)

    async def delete_topic(self, stream: str, name: str) -> None:
        state = self._stream(stream)
        topic = self._topic(stream, name)
        del state.topics[name]
        self._topics_by_id.pop(topic.id_hex, None)
        self._count_partitions(-topic.partition_total)
        await self._persist_topic_deleted(state, topic)
        for group, cursors in list(self._cursors_of(stream).items()):
            gone = [key for key in cursors if key[0] == name]
            if gone:
                await self.delete_cursors(stream, group, gone)

    async def add_partitions(self, stream: str, name: str, total: int) -> TopicInfo:
        state = self._stream(stream)
        topic = self._topic(stream, name)
        if total <= topic.info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.info.partitions} partitions; it can only grow, not to {total}"
            )
        return await self._change_topic(state, topic, dataclasses.replace(topic.info, partitions=total))

    async def set_topic_configs(self, stream: str, name: str, configs: dict[str, str]) -> TopicInfo:
        state = self._stream(stream)
        topic = self._topic(stream, name)
        info = dataclasses.replace(topic.info, configs=check_topic_configs(configs))
        return await self._change_topic(state, topic, info)

    async def _change_topic(self, state: StreamState, topic: TopicState, info: TopicInfo) -> TopicInfo:
        old = topic.info
        topic.info = info
        topic.forget_settings()
        self._count_partitions(info.partitions - old.partitions)
        try:
            await self._persist_topics(state, [topic])
        except BaseException:
            topic.info = old
            topic.forget_settings()
            self._count_partitions(old.partitions - info.partitions)
            raise
        return info

    def partition(self, stream: str, name: str, index: int) -> Partition:
        topic = self._topic(stream, name)
        if not 0 <= index < topic.info.partitions:
            raise UnknownTopicError(
                f"topic {name!r} in stream {stream!r} has no partition {index} "
                f"(it has {topic.info.partitions})"
            )
        if topic.partitions is None:
            topic.partitions = {}
        part = topic.partitions.get(index)
        if part is None:
            part = topic.partitions[index] = self._new_partition(topic, index)
        return part

    # cursors ---------------------------------------------------------------

    async def commit_cursors(
        self, stream: str, group: str, cursors: Sequence[Cursor], *, fence: StateFence | None = None
    ) -> None:
        state = self._stream(stream)
        stamped = [c if c.commit_time_ms else dataclasses.replace(c, commit_time_ms=now_ms()) for c in cursors]
        await self._write_cursors(state, group, stamped, (), fence)
        if self._follow_cursors(state):
            return
        table = state.cursors.setdefault(group, {})
        for cursor in stamped:
            table[(cursor.topic, cursor.partition)] = cursor

    async def _write_cursors(self, state: StreamState, group: str, cursors: Sequence[Cursor],
                             deleted: Sequence[tuple[str, int]], fence: StateFence | None) -> None:
        if fence is None:
            await self._persist_cursors(state, group, cursors, deleted)
        else:
            await self._persist_fenced_cursors(state, group, cursors, deleted, fence)

    def get_cursors(self, stream: str, group: str) -> list[Cursor]:
        return list(self._cursors_of(stream).get(group, {}).values())

    def get_cursor(self, stream: str, group: str, topic: str, partition: int) -> Cursor | None:
        return self._cursors_of(stream).get(group, {}).get((topic, partition))

    def list_cursor_groups(self, stream: str) -> list[str]:
        return sorted(self._cursors_of(stream))

    def _cursors_of(self, stream: str) -> dict[str, dict[tuple[str, int], Cursor]]:
        state = self._stream(stream)
        self._follow_cursors(state)
        return state.cursors

    async def delete_cursors(
        self, stream: str, group: str, partitions: Sequence[tuple[str, int]] | None = None, *,
        fence: StateFence | None = None,
    ) -> None:
        state = self._stream(stream)
        table = self._cursors_of(stream).get(group)
        if not table:
            return
        keys = list(table) if partitions is None else [tuple(p) for p in partitions if tuple(p) in table]
        if not keys:
            return
        await self._write_cursors(state, group, (), keys, fence)
        if self._follow_cursors(state):
            return
        for key in keys:
            table.pop(key, None)
        if not table:
            del state.cursors[group]

    # state tables ----------------------------------------------------------

    async def put_state(
        self, stream: str, table: str, records: Mapping[str, dict | None], *, durable: bool = True,
        fence: StateFence | None = None,
    ) -> None:
        if not _TABLE_NAME.fullmatch(table):
            raise ValueError(f"state table name {table!r} is not [a-z_]+")
        state = self._stream(stream)
        if fence is None:
            await self._persist_state(state, table, records, durable)
        else:
            await self._persist_fenced_state(state, table, records, durable, fence)
        if self._follow_table(state, table):
            return
        live = state.tables.setdefault(table, {})
        for key, value in records.items():
            if value is None:
                live.pop(key, None)
            else:
                live[key] = value
        state.table_changed(table)

    def get_state(self, stream: str, table: str) -> dict[str, dict]:
        state = self._stream(stream)
        self._follow_table(state, table)
        return dict(state.tables.get(table, {}))

    def state_version(self, stream: str, table: str) -> int:
        state = self._stream(stream)
        self._follow_table(state, table)
        return state.table_versions.get(table, 0)
