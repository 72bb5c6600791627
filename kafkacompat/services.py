"""What a handler may reach of the broker, as small typed views (typing.Protocol) instead of `ctx.cluster: Any`.

Handlers get one `Request[C]` per request; its `cluster` is the broker seen
through the views the handler declares it reaches (`C`): topics and
partitions, placement (who leads, who coordinates), security, groups and
shares, transactions and producers, configuration and features; `Context`
is a request with the whole `Broker`. Modules that handlers share declare
views of their own made of these (config_changes.ConfigChanges). A type checker (mypy, run by
tests/test_types.py) checks every use of them, and that the composition
root (broker.cluster.Cluster) and the connection's RequestContext provide
them. Structural, and the concrete classes are named for the type checker
only, so this module imports nothing of the broker at run time: any layer
may depend on it without an import circle.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

    from kafkacompat import storage
    from kafkacompat.protocol.messages import RequestHeader
    from kafkacompat.storage import Store, TopicInfo

    from .broker.cluster import ResolvedTopic
    from .broker.features import FeatureLevels
    from .broker.quotas import ClientQuotas
    from .broker.request_stats import RequestStats
    from .catalog.producer_state import ProducerStates
    from .cluster import ClusterView, Member
    from .cluster.membership import PartitionKey
    from .config import BrokerConfig
    from .groups import GroupCoordinator
    from .replication.engine import ReplicationService
    from .security.authenticator import SaslAuthenticator
    from .security.authorizer import Authorizer
    from .security.credentials import Credentials
    from .security.delegation_tokens import DelegationTokens
    from .shares.manager import ShareService
    from .transactions import TransactionCoordinator


class Topics(Protocol):
    """Topic names, their streams and their partitions in the store."""

    store: Store

    @property
    def default_stream(self) -> str: ...

    def split(self, name: str) -> tuple[str, str]: ...

    def lookup(self, name: str) -> ResolvedTopic: ...

    def topic_for(self, name: str) -> tuple[TopicInfo | None, ErrorCode]: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def listed_name(self, stream: str, topic: str, client_software_name: str = "") -> str: ...

    async def readable_partition(self, stream: str, name: str, index: int) -> storage.ReadablePartition: ...

    async def partition_figures(self, keys: Sequence[tuple[str, str, int]], partitionlets: bool
                                ) -> dict[tuple[str, str, int], storage.PartitionFigures | storage.StorageError]: ...

    async def catch_up_on(self, topics: Iterable[tuple[str, str]]) -> None: ...

    def display_name(self, info: TopicInfo, client_software_name: str = "") -> str: ...

    def is_internal(self, info: TopicInfo) -> bool: ...

    def forget_topic(self, info: TopicInfo) -> None: ...

    async def auto_create(self, name: str) -> TopicInfo: ...

    async def open_partitions(self, wanted: Iterable[tuple[TopicInfo | None, int]]) -> None: ...

    async def serving_partition(
        self, info: TopicInfo | None, missing: ErrorCode, index: int
    ) -> tuple[storage.Partition | None, ErrorCode]: ...


class Controller(Protocol):
    """The broker's view of the cluster, to have the broker that writes the shared state make a change this
    one may not (a worker other than 0 of `serve --workers N`: `ClusterView.forward_to_controller`)."""

    view: ClusterView


class Placement(Protocol):
    """Which broker leads a partition or coordinates a group, and how clients reach it."""

    node_id: int
    cluster_id: str
    host: str  # advertised
    port: int
    listener_names: list[str]  # "NAME://host:bound_port"
    view: ClusterView

    def routing(self, info: TopicInfo, index: int) -> tuple[ErrorCode, int, int]: ...

    def leader_epoch(self, info: TopicInfo, index: int, partition: storage.Partition | None) -> int: ...

    def append_epoch(self, key: PartitionKey) -> int | None: ...

    async def replica_epoch(self, key: PartitionKey) -> int | None: ...

    async def settle(self, infos: list[TopicInfo]) -> None: ...

    def coordinator(self, key: str) -> Member | None: ...

    def coordinates(self, key: str) -> bool: ...

    async def coordinator_error(self, key: str) -> ErrorCode: ...

    def brokers_for(self, listener: str) -> list[Member]: ...

    def address(self, listener: str) -> tuple[str, int]: ...


class Security(Protocol):
    """Who may do what, SCRAM users and delegation tokens."""

    authorizer: Authorizer
    credentials: Credentials
    tokens: DelegationTokens


class Groups(Protocol):
    """Consumer, streams and share groups, and the offsets topic they commit to."""

    groups: GroupCoordinator
    shares: ShareService

    def offsets_topic(self) -> TopicInfo | None: ...

    async def ensure_offsets_topic(self) -> None: ...


class Transactions(Protocol):
    """Transactions and idempotent producers' state."""

    transactions: TransactionCoordinator
    producers: ProducerStates


class Settings(Protocol):
    """Configuration, feature levels, quotas, request statistics and stream replication."""

    config: BrokerConfig
    started_config: dict[str, Any]  # the configuration's fields as the broker started with them
    features: FeatureLevels
    quotas: ClientQuotas
    stats: RequestStats
    replication: ReplicationService | None
    # this broker's /metrics text, for worker 0 of `serve --workers N` to show (None before its server sets it)
    metrics_exposition: Callable[[], Awaitable[bytes]] | None


class Broker(Topics, Placement, Security, Groups, Transactions, Settings, Protocol):
    """The whole broker as handlers see it (the composition root, broker.cluster.Cluster, provides it)."""


C = TypeVar("C", covariant=True)


class Request(Protocol[C]):
    """One request as its handler sees it (the connection's RequestContext provides it); `C` is what of the
    broker the handler declares it reaches (`Request[Security]`, `Request[object]`: nothing)."""

    @property
    def cluster(self) -> C: ...

    header: RequestHeader
    peer: str
    client_software_name: str
    size: int
    throttle_ms: int
    principal: str
    listener: str
    security_protocol: str
    sasl: SaslAuthenticator | None
    entry: str

    @property
    def version(self) -> int: ...

    def client_gone(self) -> bool:
        """Whether the client closed the connection the request came on: its answer reaches nobody."""
        ...


Context = Request[Broker]  # a request whose handler may reach the whole broker

