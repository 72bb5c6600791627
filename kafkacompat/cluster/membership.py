"""What the broker asks about the cluster: live brokers, the controller, partition leaders.

Handlers never talk to PostgreSQL: they read a `ClusterView`, a cached
picture the view's own background task keeps fresh. `SingleNode` is the
broker alone (the default: every existing behaviour unchanged);
`PostgresCluster` (postgres_cluster.py) is many brokers sharing a database.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import storage
from ..security.client import ClientSecurity
from .peers import Peers

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..protocol.admin_api import AdminReply

PartitionKey = tuple[str, str, int]  # (stream, topic, partition), as the producer state keys partitions


class ClusterError(RuntimeError):
    """This broker cannot join its cluster; the message names the cause and the fix."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Member:
    """One live broker as clients are told to reach it."""

    node_id: int
    host: str
    port: int


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), which Kafka hashes group ids with."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The __consumer_offsets partition whose leader coordinates `key`, as Kafka's
    GroupCoordinator picks it: Utils.abs(key.hashCode) % partitions."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


async def _nothing(key: object) -> None:
    return None


class ClusterView(abc.ABC):
    """The broker's picture of its cluster; every method is a cheap, synchronous read."""

    def __init__(self, me: Member) -> None:
        self.me = me
        # connections kept to the other brokers for the requests this one sends them (peers.py); a
        # worker of `serve --workers N` opens them on the workers' own channel instead
        self.peers = Peers(ClientSecurity())
        # the cloud store's tables share the leader table's database: a partition's leader epochs
        # start above the epochs the store stamped its batches with (leadership.add_missing)
        self.store_epochs = False
        # awaited once with every partition a look at the table made this broker the leader of, before
        # on_leadership_gained for each (the broker reads their offsets afresh, all in one go)
        self.on_leadership_gaining: Callable[[list[PartitionKey]], Awaitable[None]] = _nothing
        # awaited with a partition key when this broker becomes its leader, before it serves it
        # (the broker rebuilds producer state from the log, loads a coordinator partition's state)
        self.on_leadership_gained: Callable[[PartitionKey], Awaitable[None]] = _nothing
        # awaited with a partition key when this broker stops leading it (moved away, or its lease lost)
        self.on_leadership_lost: Callable[[PartitionKey], Awaitable[None]] = _nothing
        # called with a partition key the moment this broker stops serving it (before a hand-over's
        # move, and on any loss): appends of it still waiting for a commit are refused at once
        self.on_stop_serving: Callable[[PartitionKey], None] = lambda key: None

    @abc.abstractmethod
    async def start(self) -> None:
        """Join the cluster; returns once this broker is registered and has a first picture."""

    async def serving(self) -> None:
        """This broker answers clients now (its listeners are open): partitions may be handed to it."""
        return None

    async def leave(self) -> None:
        """A clean stop begins: hand the partitions this broker leads to the others now (Kafka's
        controlled shutdown), before the broker answers what it owes and closes. Alone: nothing."""
        return None

    @abc.abstractmethod
    async def close(self) -> None:
        """Leave the cluster: give up leadership and the broker's lease at once (and close `peers`)."""

    @abc.abstractmethod
    def live(self) -> list[Member]:
        """Live brokers, ordered by node id."""

    @property
    def controller_id(self) -> int:
        """The lowest live node id: deterministic, so every broker names the same one."""
        members = self.live()
        return members[0].node_id if members else self.me.node_id

    @abc.abstractmethod
    def leader_of(self, key: PartitionKey) -> tuple[int, int] | None:
        """(leader node id, leader epoch), or None while the partition has no live leader.

        SingleNode answers epoch -1: the caller then takes the store's own epoch.
        """

    async def settle(self, keys: Iterable[PartitionKey]) -> None:
        """Return once every key has a leader row (a topic just created gets its leaders before
        Metadata answers, instead of LEADER_NOT_AVAILABLE until the next heartbeat)."""
        return None

    async def catch_up(self, streams: Sequence[str] = ()) -> None:
        """Take in the topics other brokers committed before now, and `streams` if they were created
        since (a request about topics is answered from them: a topic created through another broker
        a moment ago is known here)."""
        return None

    async def catch_up_settings(self) -> None:
        """Take in the settings another process changed before now (group configs): a decision made
        once from them (a share-partition's start offset) must not be made from what was read before."""
        return None

    async def forward_to_controller(self, api_key: int, version: int, request: Any) -> Any | None:
        """The controller's answer to a catalog change this broker cannot make itself (a worker other
        than 0 of `serve --workers N`), with the change taken in here; None where this broker makes
        it, or when the controller cannot be reached (the request is then refused here)."""
        return None

    async def admin_at_controller(self, body: dict[str, Any]) -> AdminReply | None:
        """The controller's answer to a StreamAdmin request (the admin CLI's stream, topic, cursor and
        replica operations) that another process of this machine runs, with what it changed taken in
        here: a worker other than 0 of `serve --workers N` does not write the catalog. None where this
        broker runs it."""
        return None

    async def look_again(self, key: PartitionKey) -> None:
        """Read who leads `key` now rather than at the next heartbeat (a request for a partition this
        broker does not lead: it may have been handed here a moment ago)."""
        return None

    def catching_up(self, key: PartitionKey) -> bool:
        """Whether the partition was handed to this broker, which loads it before serving it (a
        coordinator answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's while loading)."""
        return False

    def knows(self, key: PartitionKey) -> bool:
        """Whether this broker has heard who leads the partition (a dead leader counts): False for
        a partition created a moment ago elsewhere, which `settle` learns about at once."""
        return True

    def leads(self, key: PartitionKey) -> bool:
        """Whether this broker may serve produce and fetch for the partition now."""
        found = self.leader_of(key)
        return found is not None and found[0] == self.me.node_id

    async def unregister(self, node_id: int) -> bool:
        """Remove a broker's registration (UnregisterBroker); False when `node_id` has none.

        A live broker registers again at once (this one alone: it never stopped being registered)."""
        return node_id == self.me.node_id

    def peer_partition(self, key: PartitionKey) -> storage.ReadablePartition | None:
        """A partition another process of this machine owns, read through that owner (a worker of
        `serve --workers N`: only the owner opens a partition's files), its figures as of its last
        answer; None where this broker's store reads every partition itself."""
        return None

    async def peer_figures(self, keys: Sequence[PartitionKey], partitionlets: bool
                           ) -> dict[PartitionKey, storage.PartitionFigures | storage.StorageError]:
        """The figures of partitions another process of this machine owns (`peer_partition`'s), asked
        of each owner once for all of its; here, where the store reads every partition, none."""
        return {key: storage.NotLeaderError(f"partition {key[0]}:{key[1]}/{key[2]} is led elsewhere", -1)
                for key in keys}

    async def relay(self, frame: bytes, key: PartitionKey | None) -> bytes | None:
        """The answer body of the process of this machine that serves a request (a whole frame, size
        prefix included) this one does not: for a worker of `serve --workers N`, the owner of partition
        `key`, or worker 0 (catalog, cursors) when `key` is None. None where this broker serves it.
        StorageError when that process cannot be reached."""
        return None

    def serving_port(self, key: PartitionKey) -> int | None:
        """The Kafka port of the process of this machine that writes partition `key` (a worker of `serve
        --workers N`), for a client that would otherwise reach it through another worker (a replica link
        into this cluster); None where every partition this broker leads is written by this process."""
        return None

    def worker_ports(self) -> list[int]:
        """The Kafka ports of every process of this machine that serves this store (the workers of
        `serve --workers N`, in order); [] for a broker that serves alone."""
        return []

    async def ask_peers(self, body: dict[str, Any], what: str) -> dict[int, Any]:
        """The answers of the other brokers this one serves HTTP for to a WorkerState request (`what`
        names it for the log), by node id: the workers of `serve --workers N` (one HTTP port for all),
        less any that cannot be asked now; {} where each broker serves its own."""
        return {}

    def member(self, node_id: int) -> Member | None:
        for member in self.live():
            if member.node_id == node_id:
                return member
        return None


class SingleNode(ClusterView):
    """The broker alone: it is every partition's leader and the controller."""

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self.peers.close()

    def live(self) -> list[Member]:
        return [self.me]

    def leader_of(self, key: PartitionKey) -> tuple[int, int] | None:
        return self.me.node_id, -1

    def leads(self, key: PartitionKey) -> bool:
        return True


def cluster_url(config: "BrokerConfig") -> str | None:
    """The PostgreSQL database brokers meet in: --cluster-url, else the store's when it is PostgreSQL."""
    if config.cluster_url:
        return config.cluster_url
    store = config.store_url
    return store if store.startswith(("postgresql://", "postgres://")) else None

