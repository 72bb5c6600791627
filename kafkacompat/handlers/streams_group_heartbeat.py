"""StreamsGroupHeartbeat (KIP-1071): Kafka Streams' group.protocol=streams (see groups.streams_coordinator).

Besides the heartbeat itself, this is where a group's internal topics
(repartition and changelog) are created, as Kafka's coordinator does,
when the member may create them (CREATE on the cluster or the topic).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Protocol

from kafkacompat import storage

from ..groups.streams_coordinator import StreamsHeartbeat, StreamsHeartbeatResult
from ..groups.streams_group import ACTIVE, STANDBY, WARMUP, Task, Tasks, by_role
from ..groups.streams_topology import InternalTopic, Subtopology, Topology
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import client_host, millis
from .registry import Api, changes

# StreamsGroupHeartbeat v0 (KIP-1071; v0 is what Kafka Streams 4.1 sends)
API = Api(88, (0, 0), changes())


class Reaches(Topics, Placement, Security, Groups, Protocol):
    """What of the broker this module reaches."""

log = logging.getLogger(__name__)
ACCEPTABLE_RECOVERY_LAG = 10_000  # Kafka's group.streams.acceptable.recovery.lag default
TASK_OFFSET_INTERVAL = datetime.timedelta(minutes=1)  # Kafka's group.streams.task.offset.interval.ms default


def _internal(topic: Any) -> InternalTopic:
    return InternalTopic(topic.name, topic.partitions, tuple((kv.key, kv.value) for kv in topic.topic_configs))


def _topology(request: Any) -> Topology | None:
    if request.topology is None:
        return None
    return Topology(request.topology.epoch, tuple(
        Subtopology(
            s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
            tuple(_internal(t) for t in s.repartition_source_topics),
            tuple(_internal(t) for t in s.state_changelog_topics),
        )
        for s in request.topology.subtopologies
    ))


def _owned(request: Any) -> Tasks | None:
    """The tasks the member says it holds; None when it sent none of the three lists (unchanged)."""
    lists = ((ACTIVE, request.active_tasks), (STANDBY, request.standby_tasks), (WARMUP, request.warmup_tasks))
    if all(ids is None for _, ids in lists):
        return None
    tasks: set[Task] = set()
    for role, ids in lists:
        for task_ids in ids or ():
            tasks.update((role, task_ids.subtopology_id, p) for p in task_ids.partitions)
    return frozenset(tasks)


def _refusal(ctx: Request[Reaches], request: Any, topology: Topology | None) -> ErrorCode | None:
    """READ on the group, DESCRIBE on every topic of the topology (KafkaApis' order)."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.group(ctx, Operation.READ, request.group_id):
        return ErrorCode.group_authorization_failed
    if topology is not None and authorizer.enabled:
        names = topology.topic_names()
        if len(authorizer.topics(ctx, Operation.DESCRIBE, names)) < len(names):
            return ErrorCode.topic_authorization_failed
    return None


async def _create_internal_topics(ctx: Request[Reaches], group_id: str, topology: Topology) -> None:
    """Create the group's missing repartition and changelog topics the member may create."""
    cluster = ctx.cluster
    configured = cluster.groups.streams.configured(topology)
    may_create = cluster.authorizer.cluster(ctx, Operation.CREATE, log_denied=False)
    created = []
    for name, (partitions, configs) in sorted(configured.to_create.items()):
        if not may_create and not cluster.authorizer.topic(ctx, Operation.CREATE, name):
            continue  # the heartbeat reports it missing
        try:
            stream, topic = cluster.split(name)
            created.append(await cluster.store.create_topic(stream, topic, partitions, configs))
            log.info("streams group %s: created internal topic %s with %d partition(s)", group_id,
                     name, partitions)
        except storage.TopicExistsError:
            continue
        except storage.StorageError as exc:  # the heartbeat reports it missing
            log.warning("streams group %s: internal topic %s could not be created: %s", group_id, name, exc)
    if created:
        await cluster.settle(created)


def _error(m: Any, code: ErrorCode, message: str | None = None) -> Any:
    return make(m.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                member_id="", member_epoch=0, heartbeat_interval=datetime.timedelta(0), acceptable_recovery_lag=0,
                task_offset_interval=datetime.timedelta(0), status=None, active_tasks=None, standby_tasks=None,
                warmup_tasks=None, endpoint_information_epoch=0, partitions_by_user_endpoint=None)


def _task_ids(m: Any, tasks: Tasks | None, role: str) -> Any:
    if tasks is None:
        return None
    return tuple(make(m.TaskIds, subtopology_id=sub, partitions=tuple(parts)) for sub, parts in by_role(tasks, role).items())


def _answer(m: Any, result: StreamsHeartbeatResult) -> Any:
    return make(
        m.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=result.error,
        error_message=result.message, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG, task_offset_interval=TASK_OFFSET_INTERVAL,
        status=tuple(make(m.Status, status_code=code, status_detail=detail) for code, detail in result.statuses),
        active_tasks=_task_ids(m, result.tasks, ACTIVE), standby_tasks=_task_ids(m, result.tasks, STANDBY),
        warmup_tasks=_task_ids(m, result.tasks, WARMUP),
        endpoint_information_epoch=0, partitions_by_user_endpoint=None,
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    topology = _topology(request)
    refused = _refusal(ctx, request, topology)
    if refused is None:
        error = await ctx.cluster.coordinator_error(request.group_id)
        refused = None if error is ErrorCode.none else error
    if refused is not None:
        return _error(m, refused)
    coordinator = ctx.cluster.groups.streams
    current = coordinator.topology_of(request.group_id) or topology
    if current is not None:
        await _create_internal_topics(ctx, request.group_id, current)
    endpoint = request.user_endpoint
    result = coordinator.heartbeat(StreamsHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout), topology=topology, owned=_owned(request),
        process_id=request.process_id,
        user_endpoint=(endpoint.host, endpoint.port) if endpoint is not None else None,
        client_tags=tuple((kv.key, kv.value) for kv in request.client_tags) if request.client_tags is not None else None,
        client_id=ctx.header.client_id or "", client_host=client_host(ctx),
    ))
    await ctx.cluster.groups.durable.flushed(request.group_id)  # the member's new epoch is stored before it acts
    if result.error != ErrorCode.none:
        return _error(m, result.error, result.message)
    return _answer(m, result)

