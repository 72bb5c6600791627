"""What ShareFetch and ShareAcknowledge share: refusals, partition lookup and acknowledgements."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kafkacompat import storage

from ..broker.features import SHARE_VERSION
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import ErrorCode, make, storage_error_code

PartitionKey = tuple[uuid.UUID, int]


class Shares(Topics, Placement, Security, Groups, Settings, Protocol):
    """What of the broker ShareFetch and ShareAcknowledge reach (through this module and their own)."""


def refusal(ctx: Request[Shares], group_id: str | None, member_id: str | None) -> tuple[ErrorCode, str | None] | None:
    """The share group protocol switched off, a request without group or member, READ on the group."""
    if ctx.cluster.features.level(SHARE_VERSION) < 1:
        return ErrorCode.unsupported_version, "The share group protocol is not enabled."
    if not group_id or not member_id:
        return ErrorCode.invalid_request, "The group id and member id must be set."
    if not ctx.cluster.authorizer.group(ctx, Operation.READ, group_id):
        return ErrorCode.group_authorization_failed, None
    return None


async def serving(ctx: Request[Shares], topic_id: uuid.UUID, index: int) -> tuple[storage.Partition | None, ErrorCode]:
    """The partition a share request names by topic id, if this broker serves it to this client."""
    cluster = ctx.cluster
    info = cluster.by_id(topic_id)
    if info is None:
        return None, ErrorCode.unknown_topic_or_partition
    authorizer = cluster.authorizer
    if authorizer.enabled and not authorizer.known_topic(ctx, Operation.READ, info.stream, info.name):
        return None, ErrorCode.topic_authorization_failed
    return await cluster.serving_partition(info, ErrorCode.unknown_topic_or_partition, index)


def ack_batches(partition: Any) -> list[tuple[int, int, tuple[int, ...]]]:
    return [(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in partition.acknowledgement_batches]


async def acknowledge(ctx: Request[Shares], group_id: str, member_id: str,
                      topics: Any) -> dict[PartitionKey, tuple[ErrorCode, str | None]]:
    """Apply every partition's acknowledgement batches of a request; its error per partition."""
    shares = ctx.cluster.shares
    out: dict[PartitionKey, tuple[ErrorCode, str | None]] = {}
    for topic in topics:
        for part in topic.partitions:
            batches = ack_batches(part)
            if not batches:
                continue
            key = (topic.topic_id, part.partition_index)
            partition, error = await serving(ctx, *key)
            if partition is None:
                out[key] = (error, None)
                continue
            try:
                out[key] = await shares.acknowledge(group_id, member_id, topic.topic_id, part.partition_index,
                                                    partition, batches)
            except storage.StorageError as exc:  # its state cannot be read now (the store logged why)
                out[key] = (storage_error_code(exc), str(exc))
    return out


def deposed(acks: dict[PartitionKey, tuple[ErrorCode, str | None]], refused: set[PartitionKey]) -> None:
    """Acknowledgements whose state this broker could not write because it no longer leads the
    partition (ShareService.flush): NOT_LEADER_OR_FOLLOWER, so the client goes to the new leader."""
    for key in refused & acks.keys():
        if acks[key][0] == ErrorCode.none:
            acks[key] = (ErrorCode.not_leader_or_follower, None)


def no_leader(m: Any) -> Any:
    """current_leader of a partition answer: only errors that move the leader name one, as Kafka does."""
    return make(m.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1)


class Leaders:
    """current_leader of the partitions answered NOT_LEADER_OR_FOLLOWER, and the node_endpoints of the
    leaders named, as Kafka's ShareFetch and ShareAcknowledge answers carry them (so a client
    goes to the new leader without waiting for Metadata)."""

    def __init__(self, ctx: Request[Shares], m: Any) -> None:
        self.ctx, self.m = ctx, m
        self.named: set[int] = set()

    def current(self, key: PartitionKey, *errors: ErrorCode) -> Any:
        if ErrorCode.not_leader_or_follower not in errors:
            return no_leader(self.m)
        info = self.ctx.cluster.by_id(key[0])
        if info is None:
            return no_leader(self.m)
        error, leader, epoch = self.ctx.cluster.routing(info, key[1])
        if error != ErrorCode.none:
            return no_leader(self.m)
        self.named.add(leader)
        return make(self.m.LeaderIdAndEpoch, leader_id=leader, leader_epoch=epoch)

    def endpoints(self) -> tuple:
        return tuple(make(self.m.NodeEndpoint, node_id=b.node_id, host=b.host, port=b.port, rack=None)
                     for b in self.ctx.cluster.brokers_for(self.ctx.listener) if b.node_id in self.named)
