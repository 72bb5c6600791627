"""What every handler reads: this broker's identity, the store and topic lookup."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.storage import Store, TopicInfo
from kafkacompat.storage.disk.shared import SCHEMAS_TOPIC  # written by the Schema Registry only

from ..catalog import broker_configs
from ..catalog.producer_state import ProducerStates
from ..cluster import ClusterView, Member, SingleNode, open_cluster_view
from ..cluster.membership import PartitionKey, cluster_url, coordinator_partition
from ..cluster.peers import Peers
from ..config import BrokerConfig
from ..groups import GroupCoordinator
from ..shares.manager import ShareService
from ..transactions import TransactionCoordinator
from ..workers.channel import WorkerChannel
from ..workers.forward import ForwardError
from ..workers.role import WorkerRole
from ..workers.share_state import forget_at_owners
from ..workers.state_client import WorkerPathTable
from ..workers.txn_forward import WorkerTransactions
from ..workers.view import WorkerView
from .features import FeatureLevels
from .request_stats import RequestStats

if TYPE_CHECKING:
    from ..replication.engine import ReplicationService
from ..security.authorizer import Authorizer
from ..security.client import load_command_config
from ..security.credentials import Credentials
from ..security.delegation_tokens import DelegationTokens
from ..security.oauthbearer import BearerValidator
from ..topic_names import LEGAL_NAMES_ONLY, TopicNameError, canonical_name, kafka_alias, split_name
from .quotas import ClientQuotas

log = logging.getLogger(__name__)
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
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


def kafka_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints one (Uuid.toString): URL-safe base64 without padding, 22 characters."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def random_kafka_uuid() -> str:
    """A new random id as Kafka's Uuid.randomUuid makes one: never starting with '-', which command
    lines would take for an option (a cluster id for kafka-storage, a token id)."""
    while True:
        text = kafka_uuid(uuid.uuid4())
        if not text.startswith("-"):
            return text


class Cluster:
    def __init__(self, config: BrokerConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id or kafka_uuid(store.store_id)
        self.host, self.port = config.advertised()
        # listener name -> (advertised host, port); the server fills it once the listeners are bound
        self.listener_addresses: dict[str, tuple[str, int]] = {}
        self.listener_names: list[str] = []  # "NAME://host:bound_port", for the `listeners` broker config
        self.credentials = Credentials(store, store.default_stream)  # SCRAM users (kafkacompat/security)
        self.tokens = DelegationTokens(store, store.default_stream, config.delegation_token_secret_key,
                                       config.delegation_token_max_lifetime_ms, config.delegation_token_expiry_time_ms)
        # OAUTHBEARER and HTTP Bearer logins: JWTs checked against the identity provider's keys
        self.oauth = BearerValidator(config) if config.sasl_oauthbearer_jwks_endpoint_url else None
        self.producers = ProducerStates(config.producer_id_expiration_ms)
        self._splits: dict[str, tuple[str, str]] = {}
        self.groups = GroupCoordinator(config, store)
        self.shares = ShareService(self)  # KIP-932 share groups (kafkacompat/shares)
        self.stats = RequestStats(config.metrics_topic_series)  # read by /metrics
        self.quotas = ClientQuotas(store)
        self.started_config = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        broker_configs.apply_dynamic(self)  # dynamic broker configs kept in the store
        self._settings_seen = store.settings_version()  # what apply_dynamic applied (follow_settings)
        self.view: ClusterView = self._open_view(config, store)
        self.transactions = self._transaction_coordinator()
        if isinstance(self.view, WorkerView):  # a coordinator's admin writes reach the partitions' owners
            self.shares.on_admin_written = functools.partial(forget_at_owners, self.view, self.shares)
        self.authorizer = Authorizer(config, store)  # every handler asks it (kafkacompat/security)
        self.replication: ReplicationService | None = None  # set by the server once the store is open
        # the replica links of `serve --workers N` run in worker 0, which writes their table and reads every
        # worker's partitions; a link another worker also ran would ship every batch twice
        self.runs_links = not isinstance(self.view, WorkerView) or self.view.role.index == 0
        # where replicated batches' paths are kept: worker 0's table for the other workers (None: the store's)
        self.path_table = None if self.runs_links else WorkerPathTable(self.view)
        # this broker's /metrics text (set by its server): what a worker of `serve --workers N` answers
        # worker 0's /metrics with (WorkerState metrics.read)
        self.metrics_exposition: Callable[[], Awaitable[bytes]] | None = None
        # The leader table lives in the store's own database: its commit can fence appends by epoch.
        self._fenced = cluster_url(config) is not None and cluster_url(config) == getattr(store, "database_url", None)
        self.view.store_epochs = self._fenced  # epochs the store stamped before a row stay below Metadata's
        self.view.on_leadership_gaining = self._leadership_gaining
        self.view.on_leadership_gained = self._leadership_gained
        self.view.on_leadership_lost = self._leadership_lost
        self.view.on_stop_serving = self._stop_serving
        self.groups.owns_all = self._coordinates_all()  # else loaded per offsets partition gained
        self.features = FeatureLevels(config, store, isinstance(self.view, SingleNode))  # kafka-features' levels
        if hasattr(store, "cleaner_fence"):  # a store shared by brokers: only a partition's leader cleans it
            store.cleaner_fence = self.cleaner_epoch
        self.groups.durable.may_write = self.coordinates
        self.groups.commit_fence = self.coordinator_fence
        # __consumer_offsets partitions led here whose groups and transactional ids could not be loaded
        # (the store was away), and the try under way to load one again (_load_again)
        self._unloaded: set[int] = set()
        # __consumer_offsets partitions just gained whose groups and transactional ids were loaded
        # together, from one read of their tables (_leadership_gaining), not one partition at a time
        self._loaded_together: set[int] = set()
        self._reloading: dict[int, asyncio.Future[bool]] = {}

    def _open_view(self, config: BrokerConfig, store: Store) -> ClusterView:
        me = Member(self.node_id, self.host, self.port)
        if config.worker_of is None:
            return open_cluster_view(config, me, self._partition_keys, self._partitions_stamp)
        role = WorkerRole.parse(config.worker_of)
        self.producers.spread(role.index, role.count)  # no two workers hand out one producer id
        view = WorkerView(me, role, store, os.path.abspath(config.store_url))
        if config.host not in ("", "0.0.0.0", "::"):
            view.controller_host = config.host
        if role.channel_fd >= 0:  # as the broker itself, on the others' Unix sockets (workers/channel.py)
            view.peers = Peers(WorkerChannel(os.path.abspath(config.store_url), role.ports))
        elif config.replication_client_config:
            view.peers = Peers(load_command_config(config.replication_client_config, "replication_client_config"))
        return view

    def _coordinates_all(self) -> bool:
        """Whether this broker coordinates every group and transactional id: alone, or the one worker
        of `serve --workers 1`. The workers of `serve --workers N` each coordinate those of the
        __consumer_offsets partitions they own (storage/disk/shared.py), loaded as they start."""
        return isinstance(self.view, SingleNode) or (isinstance(self.view, WorkerView) and self.view.role.count == 1)

    async def load_owned_coordinators(self) -> None:
        """A worker of `serve --workers N`: load the groups and transactional ids of the __consumer_offsets
        partitions it owns before clients come (what a worker that ran before wrote of them)."""
        if not isinstance(self.view, WorkerView) or self._coordinates_all():
            return
        indexes = [index for index in range(self.config.offsets_topic_num_partitions)
                   if self.view.leads((self.default_stream, OFFSETS_TOPIC, index))]
        await self._load_together(indexes)
        self._unloaded.update(index for index in indexes if index not in self._loaded_together)
        self._loaded_together.clear()

    def _transaction_coordinator(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(self.config, self.store, self.producers, self.groups)
        coordinator.marker_fence = self.marker_fence
        coordinator.state_fence = self.coordinator_fence
        coordinator.owns = self.coordinates
        coordinator.coordinator_error = self.coordinator_error
        coordinator.owns_all = self._coordinates_all()  # else loaded per offsets partition gained
        coordinator.partitions.follow_log = not coordinator.owns_all  # markers come from other brokers too
        if isinstance(self.view, WorkerView):  # a transaction's partitions may be other workers'
            view = self.view
            peers = WorkerTransactions(view, lambda txn_id: view.owner(self.offsets_partition(txn_id)))
            coordinator.leads = view.leads
            coordinator.markers_elsewhere = peers.write_markers
            coordinator.verify_remotely = peers.verify
        return coordinator

    def _partition_keys(self) -> list[PartitionKey]:
        """Every partition of the store, for the cluster view to give each one a leader."""
        return [(info.stream, info.name, index) for info in self.store.list_topics() for index in range(info.partitions)]

    def _partitions_stamp(self) -> tuple[int, int]:
        """Changes whenever _partition_keys would: a topic came or went, or a topic gained partitions."""
        return self.store.topics_changed(), self.store.partition_count()

    async def _leadership_gaining(self, keys: list[PartitionKey]) -> None:
        """Another broker may have appended since this one last led: read the offsets of the
        partitions just gained afresh, all in one go (a topic the store does not list yet has
        nothing stale to refresh: its partitions are opened from the database once it does)."""
        try:
            await self.store.refresh_many(keys)
        except storage.StorageError as exc:
            log.warning("cannot refresh %d partition(s) on becoming their leader: %s", len(keys), exc)
        await self._load_together([index for stream, topic, index in keys
                                   if (stream, topic) == (self.default_stream, OFFSETS_TOPIC)])

    async def _load_together(self, indexes: list[int]) -> None:
        """Load the groups and transactional ids of the __consumer_offsets partitions gained together from
        one read of the groups' and transactions' tables. Each partition's load read both whole tables
        again, one partition after another, between the other partitions gained: a broker taking 17 of
        50 back read them 34 times, and served its data partitions later by as much. Not read (the
        store is away): each partition's load tries itself, as before (_leadership_gained)."""
        self._loaded_together.clear()
        if not indexes:
            return
        try:
            await self.groups.read_stored()
            await self.transactions.read_stored()
        except storage.StorageError:
            return
        for index in indexes:
            if await self._load_coordinated(index, reload=False):
                self._loaded_together.add(index)

    async def _leadership_gained(self, key: PartitionKey) -> None:
        """Rebuild the partition's producers' and transactions' state from the log (at the next use).

        The groups and transactional ids placed on a __consumer_offsets partition are loaded from
        the state tables, whether or not this broker's store lists the topic yet: coordinates()
        answers for them once the partition is led and they are loaded (_load_coordinated)."""
        self.producers.forget_partition(key)
        self.transactions.partitions.forget_partition(key)
        self.shares.leadership_changed(*key)
        stream, topic, index = key
        if (stream, topic) == (self.default_stream, OFFSETS_TOPIC):  # the groups placed on it come here
            if index in self._loaded_together:
                self._loaded_together.discard(index)
            else:
                await self._load_coordinated(index)

    async def _load_coordinated(self, index: int, reload: bool = True) -> bool:
        """Load the groups and transactional ids placed on __consumer_offsets partition `index`.
        When that fails (the store is away) the index stays unloaded: their requests are answered
        COORDINATOR_LOAD_IN_PROGRESS, each trying the load again, until one loads it. Served from
        memory that was never loaded, a transaction's commit was INVALID_PRODUCER_ID_MAPPING (fatal
        to its producer) and a group's members rejoined with no committed offsets."""
        try:
            await self.groups.take_over(self._placed_on(index), reload)
            await self.transactions.take_over(self._placed_on(index), reload)
        except storage.StorageError as exc:
            if index not in self._unloaded:
                log.warning("cannot load the groups and transactional ids of %s-%d: %s; their requests are "
                            "answered COORDINATOR_LOAD_IN_PROGRESS until they load", OFFSETS_TOPIC, index, exc)
            self._unloaded.add(index)
            return False
        if index in self._unloaded:
            log.info("loaded the groups and transactional ids of %s-%d", OFFSETS_TOPIC, index)
            self._unloaded.discard(index)
        return True

    async def _load_again(self, index: int) -> bool:
        """One try at a time per partition, whichever request comes first starts it."""
        attempt = self._reloading.get(index)
        if attempt is None:
            attempt = asyncio.ensure_future(self._load_coordinated(index))
            self._reloading[index] = attempt
            attempt.add_done_callback(lambda _: self._reloading.pop(index, None))
        return await asyncio.shield(attempt)

    def _stop_serving(self, key: PartitionKey) -> None:
        """Refuse at once the partition's appends still waiting for a commit (a store whose appends
        wait for a shared write: the cloud engine), answering NOT_LEADER_OR_FOLLOWER now rather than
        once the write is done and its commit fenced; refused before any commit, none is stored."""
        stream, topic, index = key
        if self.store.get_topic(stream, topic) is None:
            return
        try:
            partition = self.store.partition(stream, topic, index)
        except storage.StorageError:
            return
        abandon = getattr(partition, "abandon_appends", None)
        if abandon is not None:
            abandon(storage.NotLeaderError(f"{stream}:{topic}/{index}: broker {self.node_id} stopped leading it; "
                                           "not appended", -1))

    async def _leadership_lost(self, key: PartitionKey) -> None:
        self.shares.leadership_changed(*key)
        stream, topic, index = key
        if (stream, topic) == (self.default_stream, OFFSETS_TOPIC):
            self._unloaded.discard(index)  # the next broker loads them; gained again, so does this one
            self.groups.unload(self._placed_on(index))
            self.transactions.unload(self._placed_on(index))

    def _placed_on(self, index: int) -> Callable[[str], bool]:
        """Whether a group id is coordinated by the leader of __consumer_offsets partition `index`."""
        count = self.config.offsets_topic_num_partitions
        return lambda group_id: coordinator_partition(group_id, count) == index

    def leader_epoch(self, info: TopicInfo, index: int, partition: storage.Partition | None) -> int:
        """The partition's leader epoch as clients see it: the cluster's when there is one, else the store's."""
        found = self.view.leader_of((info.stream, info.name, index))
        if found is not None and found[1] >= 0:
            return found[1]
        return partition.leader_epoch if partition is not None else -1

    def append_epoch(self, key: PartitionKey) -> int | None:
        """The leader epoch an append to `key` is made under, for the store to fence it by
        (a deposed leader's batch is refused in the commit transaction); None outside a
        cluster whose leader table the store's database holds."""
        if not self._fenced:
            return None
        found = self.view.leader_of(key)
        return found[1] if found is not None and found[0] == self.node_id else None

    async def replica_epoch(self, key: PartitionKey) -> int | None:
        """The leader epoch a batch copied from another cluster (stream replication) is stored
        under: as a produced one, only by the partition's leader while it leads, so a broker whose
        lease lapsed cannot land one. None outside a fenced cluster; NotLeaderError elsewhere.
        A partition the copy just created gets its leader first (as serving_partition does)."""
        if not self._fenced:
            return None
        if not self.view.knows(key):
            await self.view.settle([key])
        epoch = self.append_epoch(key) if self.view.leads(key) else None
        if epoch is None:
            raise storage.NotLeaderError(f"{key[0]}:{key[1]}/{key[2]} is not led by broker {self.node_id}", -1)
        return epoch

    def coordinator_fence(self, key: str) -> storage.StateFence | None:
        """(stream, __consumer_offsets, partition, epoch) a coordinator's write for a group or
        transactional id is fenced by: the key's __consumer_offsets partition and the epoch this
        broker leads it in, so a deposed coordinator, which believes it leads until its next lease
        renewal, cannot land a write after its successor's, as Kafka's leader epoch fences writes to
        __consumer_offsets. None outside a fenced cluster; NotLeaderError when this broker no longer
        coordinates the key (its lease lapsed or the partition moved)."""
        if not self._fenced:
            return None
        key_of = self.offsets_partition(key)
        epoch = self.append_epoch(key_of) if self.view.leads(key_of) else None
        if epoch is None:
            raise storage.NotLeaderError(f"broker {self.node_id} no longer coordinates {key!r}", -1)
        return (*key_of, epoch)

    def marker_fence(self, txn_id: str) -> tuple[storage.Partition, int] | None:
        """(the __consumer_offsets partition whose leader coordinates `txn_id`, the epoch this broker
        leads it in): a transaction marker is stored only while that epoch holds, as Kafka's
        partition leaders refuse a deposed coordinator's markers; the marker itself carries the
        marked partition's leader epoch. None outside a fenced cluster; NotLeaderError when this
        broker no longer coordinates the id (see coordinator_fence)."""
        fence = self.coordinator_fence(txn_id)
        if fence is None:
            return None
        stream, topic, index, epoch = fence
        return self.store.partition(stream, topic, index), epoch

    def cleaner_epoch(self, stream: str, topic: str, index: int) -> int | None:
        """The leader epoch under which this broker cleans a compacted partition: only its leader
        does, and the store refuses the cleaning if the epoch moved meanwhile (-1: not fenced in the
        store's database); None when another broker leads it."""
        key = (stream, topic, index)
        if not self.view.leads(key):
            return None
        return self.append_epoch(key) if self._fenced else -1

    def routing(self, info: TopicInfo, index: int) -> tuple[ErrorCode, int, int]:
        """(error, leader id, leader epoch) of a partition for Metadata and DescribeTopicPartitions.

        LEADER_NOT_AVAILABLE with leader -1 while its leader is dead and not yet
        replaced, as Kafka answers; clients retry. The store's epoch is taken only
        where it can be read: a partition whose files cannot be served is still led
        here, and produce and fetch answer KAFKA_STORAGE_ERROR for it alone.
        """
        found = self.view.leader_of((info.stream, info.name, index))
        if found is None:
            return ErrorCode.leader_not_available, -1, -1
        leader, epoch = found
        if epoch < 0:
            try:
                epoch = self.store.routing_epoch(info.stream, info.name, index)
            except storage.StorageError:
                epoch = -1
        return ErrorCode.none, leader, epoch

    def brokers(self) -> list[Member]:
        """The live brokers clients are told about (this one alone outside a cluster)."""
        return self.view.live() or [Member(self.node_id, self.host, self.port)]

    async def settle(self, infos: list[TopicInfo]) -> None:
        """Give the partitions of topics just created (here or by another broker) their leaders now."""
        await self.view.settle((info.stream, info.name, index) for info in infos for index in range(info.partitions))

    def follow_settings(self) -> None:
        """Apply the dynamic broker configs again when the store's settings moved: set through another
        broker of the cluster or through worker 0, they counted here only after a restart. Asked before
        each request, so one that comes after the change is served under it."""
        version = self.store.settings_version()
        if version != self._settings_seen:
            self._settings_seen = version
            broker_configs.apply_dynamic(self)

    def offsets_partition(self, key: str) -> PartitionKey:
        """The __consumer_offsets partition of a group or transactional id: its leader coordinates it."""
        return self.default_stream, OFFSETS_TOPIC, coordinator_partition(key, self.config.offsets_topic_num_partitions)

    def coordinator(self, key: str) -> Member | None:
        """The live broker that coordinates a group or transactional id: the leader of its
        __consumer_offsets partition, as on Kafka; None while that partition has no leader."""
        found = self.view.leader_of(self.offsets_partition(key))
        return None if found is None else self.view.member(found[0])

    def coordinates(self, key: str) -> bool:
        """Whether this broker is the coordinator of a group or transactional id (others answer
        NOT_COORDINATOR): it leads the key's __consumer_offsets partition, its lease is valid and
        it loaded what that partition's groups and transactional ids are."""
        partition = self.offsets_partition(key)
        return self.view.leads(partition) and partition[2] not in self._unloaded

    async def coordinator_error(self, key: str) -> ErrorCode:
        """NONE when this broker coordinates a group or transactional id, else the retriable
        refusal every coordinator-bound request answers: first waiting, at most look_again's
        bound, for this broker to take the key's __consumer_offsets partition when it was handed
        here or created a moment ago. Then COORDINATOR_LOAD_IN_PROGRESS while it still loads
        the partition, NOT_COORDINATOR when another broker has it, as Kafka answers. A group's
        first JoinGroup, sent to the broker FindCoordinator named while that broker still caught
        up the offsets topic just created, was answered NOT_COORDINATOR, and librdkafka joined
        again about 3 s later: the first group on a fresh cluster joined twice."""
        if self.coordinates(key):
            return ErrorCode.none
        partition = self.offsets_partition(key)
        if partition[2] in self._unloaded and self.view.leads(partition):
            loaded = await self._load_again(partition[2])
            return ErrorCode.none if loaded and self.coordinates(key) else ErrorCode.coordinator_load_in_progress
        await self.view.look_again(partition)
        if self.coordinates(key):
            return ErrorCode.none
        return ErrorCode.coordinator_load_in_progress if self.view.catching_up(partition) else ErrorCode.not_coordinator

    def brokers_for(self, listener: str) -> list[Member]:
        """brokers(), with this one at the address of the client's listener (peers keep what they advertise)."""
        own = Member(self.node_id, *self.address(listener))
        return [own if member.node_id == self.node_id else member for member in self.brokers()]

    def address(self, listener: str) -> tuple[str, int]:
        """The address clients of `listener` are told (Metadata, FindCoordinator, DescribeCluster)."""
        return self.listener_addresses.get(listener) or (self.host, self.port)

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
        """The partition of a looked-up topic, or None and the code to answer (NOT_LEADER_OR_FOLLOWER
        on a broker that does not lead it, so clients refresh Metadata and go to the leader)."""
        if info is None:
            return None, missing
        if not 0 <= index < info.partitions:
            return None, ErrorCode.unknown_topic_or_partition
        if not self.view.leads((info.stream, info.name, index)):
            return None, ErrorCode.not_leader_or_follower
        try:
            return self.store.partition(info.stream, info.name, index), ErrorCode.none
        except storage.UnknownTopicError:
            return None, ErrorCode.unknown_topic_or_partition
        except storage.StorageError:  # damaged or unreadable files: logged once by the store
            return None, ErrorCode.kafka_storage_error

    async def open_partitions(self, wanted: Iterable[tuple[TopicInfo | None, int]]) -> None:
        """Open ahead, together, the partitions this broker leads of those a request names: opened off
        the event loop one at a time, a Produce to thousands of partitions after a crash would wait a
        round trip to the opening thread for each (serving_partition then finds them open)."""
        await self.store.open_partitions((info.stream, info.name, index) for info, index in wanted
                                         if info is not None and self.view.leads((info.stream, info.name, index)))

    async def serving_partition(
        self, info: TopicInfo | None, missing: ErrorCode, index: int
    ) -> tuple[storage.Partition | None, ErrorCode]:
        """partition_for, first learning the leader of a partition this broker has not heard of.

        Another broker creates a topic, gives its partitions leaders and names them in its
        Metadata answer at once; the leader named learns of it at its next heartbeat. A request
        reaching it before then makes it look now, instead of answering NOT_LEADER_OR_FOLLOWER:
        that refusal made clients retry, and a producer without idempotence with requests in
        flight then stored a topic's first batches out of order.
        """
        if info is not None and 0 <= index < info.partitions and not self.view.knows((info.stream, info.name, index)):
            await self.view.settle([(info.stream, info.name, index)])
        if info is not None and 0 <= index < info.partitions and self.view.leads((info.stream, info.name, index)):
            try:  # opened off the event loop: a crash's tail check does not hold other clients
                await self.store.open_partition(info.stream, info.name, index)
            except storage.StorageError:
                pass  # partition_for answers the error the store keeps for it
        found = self.partition_for(info, missing, index)
        if found[1] == ErrorCode.not_leader_or_follower:  # handed here a moment ago? (look_again)
            assert info is not None
            await self.view.look_again((info.stream, info.name, index))
            found = self.partition_for(info, missing, index)
        return found

    async def catch_up_on(self, topics: Iterable[tuple[str, str]]) -> None:
        """Take in the catalog first when a (stream, topic) named is not known here: a worker of `serve
        --workers N` asked about a topic worker 0 made a moment ago, before its next refresh."""
        unknown = sorted({stream for stream, topic in topics if self.store.get_topic(stream, topic) is None})
        if unknown:
            await self.view.catch_up(unknown)

    def partition_to_read(self, stream: str, name: str, index: int) -> storage.ReadablePartition:
        """A partition to read records and figures from (replica links): the store's own, or one another
        worker of `serve --workers N` owns, read through it (its figures as of its last answer).
        StorageError as the store's `partition`."""
        try:
            return self.store.partition(stream, name, index)
        except storage.NotLeaderError:
            peer = self.view.peer_partition((stream, name, index))
            if peer is None:
                raise
            return peer

    def serving_port(self, stream: str, name: str, index: int) -> int | None:
        """The port of the worker of `serve --workers N` that writes the partition; None: this process."""
        return self.view.serving_port((stream, name, index))

    def worker_ports(self) -> list[int]:
        """Every worker's port, in worker order, for `serve --workers N`; [] for a broker of its own."""
        return self.view.worker_ports()

    async def readable_partition(self, stream: str, name: str, index: int) -> storage.ReadablePartition:
        """`partition_to_read`, another worker's with its figures as they are now (the console, /metrics,
        stream views); StorageError also when its owner cannot be asked."""
        partition = self.partition_to_read(stream, name, index)
        if not isinstance(partition, storage.Partition):  # another worker's (this store's are always current)
            await partition.refresh()
        return partition

    async def partition_figures(self, keys: Sequence[PartitionKey], partitionlets: bool
                                ) -> dict[PartitionKey, storage.PartitionFigures | storage.StorageError]:
        """Each partition's offsets, and its partitionlets when asked (views of many partitions: topic
        and cursor listings, the console): this store's, and those another worker of `serve --workers
        N` owns, asked of it in one request per worker. Asked one partition at a time, a listing of
        5,000 topics took 2.9-3.8 s against 0.3-0.6 s on one process. A partition that cannot be read
        has its StorageError."""
        found: dict[PartitionKey, storage.PartitionFigures | storage.StorageError] = {}
        elsewhere = []
        for key in keys:
            try:
                partition = self.store.partition(*key)
                lets = tuple(await partition.partitionlets()) if partitionlets else ()
            except storage.NotLeaderError:
                elsewhere.append(key)
                continue
            except storage.StorageError as exc:
                found[key] = exc
                continue
            found[key] = storage.PartitionFigures(partition.log_start_offset, partition.high_watermark, lets)
        if elsewhere:
            found.update(await self.view.peer_figures(elsewhere, partitionlets))
        return found

    def forget_topic(self, info: TopicInfo) -> None:
        """Drop the in-memory producer and transaction state of a deleted topic's partitions."""
        for index in range(info.partitions):
            self.producers.forget_partition((info.stream, info.name, index))
            self.transactions.partitions.forget_partition((info.stream, info.name, index))

    async def reset_producers(self) -> None:
        """Forget every producer and transactional id (the test broker's reset)."""
        await self.transactions.close()
        await self.transactions.forget_all()
        self.producers = ProducerStates(self.config.producer_id_expiration_ms)
        self.transactions = self._transaction_coordinator()
        await self.transactions.start()

    def listed_name(self, stream: str, topic: str, client_software_name: str = "") -> str:
        """The name a topic is listed under when no client named it: canonical, or the
        Kafka-legal alias for a client that cannot take anything else (see LEGAL_NAMES_ONLY)."""
        if client_software_name in LEGAL_NAMES_ONLY:
            return kafka_alias(stream, topic, self.default_stream)
        return canonical_name(stream, topic, self.default_stream)

    def display_name(self, info: TopicInfo, client_software_name: str = "") -> str:
        return self.listed_name(info.stream, info.name, client_software_name)

    def is_internal(self, info: TopicInfo) -> bool:
        """Kafka's internal flag, and no producer's to write: __consumer_offsets and every stream's _schemas."""
        return (info.name == OFFSETS_TOPIC and info.stream == self.default_stream) or info.name == SCHEMAS_TOPIC

    def offsets_topic(self) -> TopicInfo | None:
        return self.store.get_topic(self.default_stream, OFFSETS_TOPIC)

    async def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets when a group first finds its coordinator, as Kafka does.

        Offsets live in cursors; this topic is Kafka's public face of them:
        listed as internal, readable (empty), refused to producers.
        """
        if self.store.get_topic(self.default_stream, OFFSETS_TOPIC) is not None:
            return
        if isinstance(self.view, WorkerView) and self.view.role.index > 0:
            # worker 0 writes the catalog: it creates the topic when asked for a coordinator, as here
            try:
                await self.view.offsets_topic_by_controller()
            except ForwardError as exc:
                raise storage.StorageError(str(exc)) from None  # COORDINATOR_NOT_AVAILABLE: clients retry
            return
        try:
            await self.store.create_topic(
                self.default_stream, OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, dict(OFFSETS_TOPIC_CONFIGS)
            )
            log.info("created %s with %d partition(s)", OFFSETS_TOPIC, self.config.offsets_topic_num_partitions)
        except storage.TopicExistsError:
            pass

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.store.get_topic_by_id(topic_id)

    async def _created_by_worker_0(self, name: str, stream: str, topic: str, partitions: int) -> TopicInfo:
        """Auto-creation on a worker other than 0: worker 0 writes the catalog, so it creates the topic
        (as a Kafka broker forwards auto-creation to its controller); LEADER_NOT_AVAILABLE, which
        clients retry, if it cannot be asked."""
        assert isinstance(self.view, WorkerView)
        try:
            await self.view.create_at_controller(name, partitions)
        except ForwardError as exc:
            log.warning("cannot auto-create topic %s: %s", name, exc)
            raise TopicError(ErrorCode.leader_not_available, str(exc)) from None
        created = self.store.get_topic(stream, topic)
        if created is None:  # deleted again at once
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name} does not exist")
        log.info("auto-created topic %s with %d partition(s) through worker 0", name, created.partitions)
        return created

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
        if isinstance(self.view, WorkerView) and self.view.role.index > 0:
            return await self._created_by_worker_0(name, stream, topic, info.policy.default_partitions)
        try:
            created = await self.store.create_topic(stream, topic, info.policy.default_partitions)
        except storage.TopicExistsError:
            created = self.store.get_topic(stream, topic)
            assert created is not None
        log.info("auto-created topic %s with %d partition(s)", name, created.partitions)
        await self.settle([created])
        return created
