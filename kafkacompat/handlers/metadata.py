"""Metadata: the routing table: the live brokers and each partition's leader (see kafkacompat/cluster).

Topics come back under the name the client asked for (a plain name, a
`/stream:topic` name or its alias); a request for all topics (or by topic
id) lists canonical names, or aliases to a client that takes only
Kafka-legal names (kafka-python, whose pattern subscription matches the
listed names, and Kafka's Java tools, which match names against the list).
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kafkacompat.protocol.messages import MalformedRequestError, encode_body
from kafkacompat.protocol.topic_entries import encode_topic_entry
from kafkacompat.storage import TopicInfo

from ..broker.cluster import TopicError
from ..security.acls import CLUSTER_NAME, Operation, ResourceType
from ..services import Placement, Request, Security, Topics
from .common import (
    ALL_CLUSTER_OPERATIONS,
    ALL_TOPIC_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    ErrorCode,
    make,
    schema_of,
)
from .registry import Api, reads
from .slices import ENCODED_FROM, Slicer, encode_with_array
from .topic_routes import partition_routes, topic_operations

# Metadata v0-12
API = Api(3, (0, 12), reads(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Protocol):
    """What of the broker this module reaches."""



def _topic_entry(ctx: Request[Reaches], m: Any, name: str, info: TopicInfo, ops: int) -> Any:
    """A found topic's entry as a kio entity (answers about fewer than ENCODED_FROM topics)."""
    return make(
        m.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=name,
        topic_id=info.topic_id,
        is_internal=ctx.cluster.is_internal(info),
        partitions=tuple(make(
            m.MetadataResponsePartition,
            error_code=route.error_code,
            partition_index=route.partition_index,
            leader_id=route.leader_id,
            leader_epoch=route.leader_epoch,
            replica_nodes=route.replica_nodes,
            isr_nodes=route.isr_nodes,
            offline_replicas=(),
        ) for route in partition_routes(ctx.cluster, info)),
        topic_authorized_operations=topic_operations(ctx, info, ops),
    )


def _topic_bytes(ctx: Request[Reaches], name: str, info: TopicInfo, ops: int) -> bytes:
    """The same entry written by hand (big answers: kio's writer took two thirds of their time)."""
    return encode_topic_entry(ctx.header.api_key, ctx.version, ErrorCode.none, name, info.topic_id,
                              ctx.cluster.is_internal(info), partition_routes(ctx.cluster, info),
                              topic_operations(ctx, info, ops))


def _error_entry(m: Any, name: str | None, code: ErrorCode, topic_id: Any = None) -> Any:
    return make(
        m.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id or uuid.UUID(int=0),
        is_internal=False,
        partitions=(),
        topic_authorized_operations=UNSET_OPERATIONS,
    )


def _streams_named(ctx: Request[Reaches], wanted: Any) -> list[str]:
    """The streams of the topics asked for by name."""
    streams = set()
    for topic in wanted or ():
        if topic.name:
            try:
                streams.add(ctx.cluster.split(topic.name)[0])
            except TopicError:
                continue  # answered INVALID_TOPIC_EXCEPTION below
    return sorted(streams)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    version = ctx.version
    ops = ALL_TOPIC_OPERATIONS if getattr(request, "include_topic_authorized_operations", False) else UNSET_OPERATIONS
    # v0 sent an empty list for "all topics"; v1+ send null for all.
    wanted = request.topics
    if version == 0 and not wanted:
        wanted = None
    allow_create = getattr(request, "allow_auto_topic_creation", True)
    entries: list[Any] = []  # a topic entry, or (name, info) of a found topic until leaders are settled
    await cluster.view.catch_up(_streams_named(ctx, wanted))  # made through another broker a moment ago: known
    authorizer = cluster.authorizer
    slicer = Slicer()
    info: TopicInfo | None
    if wanted is None:
        for info in cluster.store.iter_topics():
            await slicer.pause()
            if authorizer.enabled and not authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name,
                                                                 log_denied=False):
                continue  # a listing hides what the principal may not describe, as Kafka's does
            entries.append((cluster.display_name(info, ctx.client_software_name), info))
    else:
        for wanted_topic in wanted:
            name = wanted_topic.name
            topic_id = getattr(wanted_topic, "topic_id", None)
            if name is None and version < 12:  # v10-11 requests allow a null name, their responses do not (as Kafka)
                raise MalformedRequestError(f"Metadata v{version}: a topic name is null; topic ids need v12 or later")
            # by id when the id is set (v12+), whatever the name: Kafka's Java client (4.x) sends an
            # empty name, not null, with the ids of the topics a KIP-848 assignment named
            if version >= 12 and topic_id is not None and topic_id.int != 0:
                info = cluster.by_id(topic_id)
                if info is None:
                    entries.append(_error_entry(m, None, ErrorCode.unknown_topic_id, topic_id))
                elif not authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name):
                    entries.append(_error_entry(m, None, ErrorCode.topic_authorization_failed, topic_id))
                else:
                    entries.append((cluster.display_name(info, ctx.client_software_name), info))
                continue
            if not authorizer.topic(ctx, Operation.DESCRIBE, name):
                entries.append(_error_entry(m, name, ErrorCode.topic_authorization_failed))
                continue  # not even whether it exists is told
            try:
                found = cluster.lookup(name)
                info = found.info
                if info is None:
                    if not allow_create:
                        raise TopicError(ErrorCode.unknown_topic_or_partition, name)
                    if authorizer.enabled and not (authorizer.cluster(ctx, Operation.CREATE, log_denied=False)
                                                   or authorizer.topic(ctx, Operation.CREATE, name)):
                        raise TopicError(ErrorCode.topic_authorization_failed, name)
                    info = await cluster.auto_create(name)
            except TopicError as exc:
                entries.append(_error_entry(m, name, exc.code))
                continue
            entries.append((name, info))
    await cluster.settle([entry[1] for entry in entries if isinstance(entry, tuple)])

    big = len(entries) >= ENCODED_FROM
    if not big:
        entries = [_topic_entry(ctx, m, entry[0], entry[1], ops) if isinstance(entry, tuple) else entry
                   for entry in entries]
    answer = make(
        m.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=tuple(make(m.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port, rack=None)
                      for b in cluster.brokers_for(ctx.listener)),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.view.controller_id,
        topics=() if big else tuple(entries),
        cluster_authorized_operations=(  # v8-10 only
            cluster.authorizer.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, ALL_CLUSTER_OPERATIONS)
            if getattr(request, "include_cluster_authorized_operations", False) else UNSET_OPERATIONS
        ),
    )
    if not big:
        return answer  # a kio entity, which injected faults and error counts read

    def encoded(entry: Any) -> bytes:
        return _topic_bytes(ctx, entry[0], entry[1], ops) if isinstance(entry, tuple) else encode_body(entry)

    return await encode_with_array(ctx.header.api_key, version, answer, "topics", entries, encoded, slicer,
                                   sample=_error_entry(m, "", ErrorCode.none))
