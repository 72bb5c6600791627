"""Confluent REST Proxy v3 admin: clusters, brokers, topics, partitions, configs, consumer groups and lag.

Paths, bodies and answers follow Confluent's kafka-rest v3 API, so its
clients work unchanged. Every answer comes from a Kafka API call run
in-process through the broker's own handlers (Metadata, CreateTopics,
DescribeConfigs, DescribeGroups, OffsetFetch, ListOffsets, ...), never from
a second reading of the store. Topic names may be `/stream:topic`
(URL-encoded in paths).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web
from kio.schema.errors import ErrorCode

from ..broker.cluster import Cluster
from ..groups.consumer_protocol import parse_assignment
from .common import BROKER
from .kafka_calls import NO_TOPIC_ID, ask_leaders, build, call, coordinator_call, list_offsets_request, peer_call
from .rest_errors import INT16, RestError, check, field, int_field, kafka_error, not_found, read_json
from .rest_names import kafka_name

# Kafka API keys the admin routes call
METADATA, LIST_OFFSETS, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 3, 2, 9, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 32, 37, 44
CONSUMER_GROUP_DESCRIBE = 69
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1
CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
GROUP_STATES = {"PreparingRebalance": "PREPARING_REBALANCE", "CompletingRebalance": "COMPLETING_REBALANCE",
                "Stable": "STABLE", "Dead": "DEAD", "Empty": "EMPTY"}
TIMEOUT = datetime.timedelta(seconds=30)
# a group's errors that are not "no such group": refused, or its coordinator could not be asked
NOT_FOUND_HERE = (ErrorCode.group_authorization_failed, ErrorCode.not_coordinator,
                  ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)


def cluster_of(request: web.Request) -> Cluster:
    """The broker's cluster, or 404 when the path names another cluster id."""
    cluster = request.app[BROKER].cluster
    if cluster is None:
        raise kafka_error(ErrorCode.coordinator_not_available, "the broker is starting")
    wanted = request.match_info.get("cluster_id")
    if wanted is not None and wanted != cluster.cluster_id:
        raise not_found(f"Cluster {wanted} cannot be found.")
    return cluster


def url(request: web.Request, *parts: Any) -> str:
    return str(request.url.origin()) + "/" + "/".join(str(p) for p in parts)


def related(request: web.Request, *parts: Any) -> dict[str, str]:
    return {"related": url(request, *parts)}


def resource(kind: str, request: web.Request, crn: str, *parts: Any, **fields: Any) -> dict[str, Any]:
    """A v3 resource: kind, metadata (self link, resource name) and its fields."""
    return {"kind": kind, "metadata": {"self": url(request, *parts), "resource_name": crn}, **fields}


def listing(kind: str, request: web.Request, data: list[dict[str, Any]]) -> web.Response:
    return web.json_response({"kind": kind, "metadata": {"self": str(request.url), "next": None}, "data": data})


def quoted(name: str) -> str:
    """A topic name as a URL path segment (stream paths carry '/' and ':')."""
    return quote(name, safe="")


# --- clusters and brokers ------------------------------------------------------------------------


def _cluster(request: web.Request, cluster: Cluster) -> dict[str, Any]:
    cid = cluster.cluster_id
    base = ("v3", "clusters", cid)
    return resource(
        "KafkaCluster", request, f"crn:///kafka={cid}", *base, cluster_id=cid,
        controller=related(request, *base, "brokers", cluster.node_id),
        acls=related(request, *base, "acls"), brokers=related(request, *base, "brokers"),
        broker_configs=related(request, *base, "broker-configs"),
        consumer_groups=related(request, *base, "consumer-groups"), topics=related(request, *base, "topics"),
        partition_reassignments=related(request, *base, "topics", "-", "partitions", "-", "reassignment"),
    )


async def list_clusters(request: web.Request) -> web.Response:
    return listing("KafkaClusterList", request, [_cluster(request, cluster_of(request))])


async def get_cluster(request: web.Request) -> web.Response:
    return web.json_response(_cluster(request, cluster_of(request)))


def _broker(request: web.Request, cluster: Cluster, broker: Any) -> dict[str, Any]:
    base = ("v3", "clusters", cluster.cluster_id, "brokers", broker.node_id)
    return resource(
        "KafkaBroker", request, f"crn:///kafka={cluster.cluster_id}/broker={broker.node_id}", *base,
        cluster_id=cluster.cluster_id, broker_id=broker.node_id, host=broker.host, port=broker.port,
        rack=broker.rack, configs=related(request, *base, "configs"),
        partition_replicas=related(request, *base, "partition-replicas"),
    )


async def cluster_brokers(cluster: Cluster) -> list[Any]:
    """The brokers Metadata names, by id: every worker of `serve --workers N`, every live broker of the
    cloud engine (before stop 56 only the broker serving HTTP was listed)."""
    answer = await call(cluster, METADATA, build(METADATA, topics=(), allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
    return sorted(answer.brokers, key=lambda b: b.node_id)


async def list_brokers(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    return listing("KafkaBrokerList", request, [_broker(request, cluster, b) for b in await cluster_brokers(cluster)])


async def get_broker(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    for broker in await cluster_brokers(cluster):
        if request.match_info["broker_id"] == str(broker.node_id):
            return web.json_response(_broker(request, cluster, broker))
    raise not_found(f"Broker {request.match_info['broker_id']} cannot be found.")


# --- topics --------------------------------------------------------------------------------------


async def topic_metadata(cluster: Cluster, names: list[str] | None) -> list[Any]:
    """Metadata's answer for the named topics (None: every topic), never auto-creating one."""
    topics = None if names is None else tuple(
        build(METADATA, "MetadataRequestTopic", name=n, topic_id=NO_TOPIC_ID) for n in names)
    answer = await call(cluster, METADATA, build(METADATA, topics=topics, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
    return list(answer.topics)


async def described_topic(request: web.Request, cluster: Cluster, name: str) -> Any:
    """The Metadata answer for one topic, or Kafka's UNKNOWN_TOPIC_OR_PARTITION as 404/40403."""
    (topic,) = await topic_metadata(cluster, [name])
    check(topic.error_code)
    return topic


def _topic(request: web.Request, cluster: Cluster, topic: Any) -> dict[str, Any]:
    cid = cluster.cluster_id
    base = ("v3", "clusters", cid, "topics", quoted(topic.name))
    return resource(
        "KafkaTopic", request, f"crn:///kafka={cid}/topic={topic.name}", *base,
        cluster_id=cid, topic_name=topic.name, is_internal=topic.is_internal, replication_factor=1,
        partitions_count=len(topic.partitions), partitions=related(request, *base, "partitions"),
        configs=related(request, *base, "configs"),
        partition_reassignments=related(request, *base, "partitions", "-", "reassignment"),
        authorized_operations=[],
    )


async def list_topics(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    topics = sorted(await topic_metadata(cluster, None), key=lambda t: t.name)
    return listing("KafkaTopicList", request, [_topic(request, cluster, t) for t in topics if t.error_code == 0])


async def get_topic(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    topic = await described_topic(request, cluster, kafka_name(request, request.match_info["topic"]))
    return web.json_response(_topic(request, cluster, topic))


async def create_topic(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    body = await read_json(request)
    name = kafka_name(request, field(body, "topic_name", str, required=True))
    partitions = int_field(body, "partitions_count", -1)
    replication = int_field(body, "replication_factor", -1, bounds=INT16)
    configs = tuple(
        build(CREATE_TOPICS, "CreatableTopicConfig", name=field(c, "name", str, required=True),
              value=field(c, "value", str, None))
        for c in field(body, "configs", list, [])
    )
    validate_only = field(body, "validate_only", bool, False)
    topic = build(CREATE_TOPICS, "CreatableTopic", name=name, num_partitions=partitions,
                  replication_factor=replication, assignments=(), configs=configs)
    answer = await call(cluster, CREATE_TOPICS, build(CREATE_TOPICS, topics=(topic,), timeout=TIMEOUT,
                                                      validate_only=validate_only))
    (result,) = answer.topics
    check(result.error_code, result.error_message)
    if validate_only:
        described = {"name": name, "is_internal": False, "partitions": [None] * max(result.num_partitions, 0)}
        return web.json_response(_topic(request, cluster, _Named(**described)), status=201)
    return web.json_response(_topic(request, cluster, await described_topic(request, cluster, name)), status=201)


class _Named:
    """A topic not created (validate_only): what `_topic` reads of a Metadata answer."""

    def __init__(self, name: str, is_internal: bool, partitions: list[Any]) -> None:
        self.name, self.is_internal, self.partitions = name, is_internal, partitions


async def delete_topic(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    name = kafka_name(request, request.match_info["topic"])
    state = build(DELETE_TOPICS, "DeleteTopicState", name=name, topic_id=NO_TOPIC_ID)
    answer = await call(cluster, DELETE_TOPICS, build(DELETE_TOPICS, topics=(state,), timeout=TIMEOUT))
    (result,) = answer.responses
    check(result.error_code, result.error_message)
    return web.Response(status=204)


async def update_topic(request: web.Request) -> web.Response:
    """PATCH a topic's partitions_count up (CreatePartitions)."""
    cluster = cluster_of(request)
    name = kafka_name(request, request.match_info["topic"])
    count = int_field(await read_json(request), "partitions_count", required=True)
    topic = build(CREATE_PARTITIONS, "CreatePartitionsTopic", name=name, count=count, assignments=None)
    answer = await call(cluster, CREATE_PARTITIONS, build(CREATE_PARTITIONS, topics=(topic,), timeout=TIMEOUT,
                                                          validate_only=False))
    (result,) = answer.results
    check(result.error_code, result.error_message)
    return web.json_response(_topic(request, cluster, await described_topic(request, cluster, name)))


# --- partitions ----------------------------------------------------------------------------------


def _partition(request: web.Request, cluster: Cluster, topic: str, index: int, leader: int) -> dict[str, Any]:
    cid = cluster.cluster_id
    base = ("v3", "clusters", cid, "topics", quoted(topic), "partitions", index)
    replica = related(request, *base, "replicas", leader)
    return resource(
        "KafkaPartition", request, f"crn:///kafka={cid}/topic={topic}/partition={index}", *base,
        cluster_id=cid, topic_name=topic, partition_id=index, leader=replica,
        replicas=related(request, *base, "replicas"), reassignment=related(request, *base, "reassignment"),
    )


async def list_partitions(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    topic = await described_topic(request, cluster, kafka_name(request, request.match_info["topic"]))
    return listing("KafkaPartitionList", request, [_partition(request, cluster, topic.name, p.partition_index,
                                                              p.leader_id)
                                                   for p in sorted(topic.partitions, key=lambda p: p.partition_index)])


def partition_index(request: web.Request) -> int:
    try:
        return int(request.match_info["partition_id"])
    except ValueError:
        raise not_found(f"Partition {request.match_info['partition_id']} cannot be found.") from None


async def get_partition(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    topic = await described_topic(request, cluster, kafka_name(request, request.match_info["topic"]))
    index = partition_index(request)
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    if index not in leaders:
        raise not_found(f"Partition {index} of topic {topic.name} cannot be found.")
    return web.json_response(_partition(request, cluster, topic.name, index, leaders[index]))


# --- topic configs -------------------------------------------------------------------------------


async def topic_configs(cluster: Cluster, name: str) -> list[Any]:
    res = build(DESCRIBE_CONFIGS, "DescribeConfigsResource", resource_type=TOPIC_RESOURCE, resource_name=name,
                configuration_keys=None)
    answer = await call(cluster, DESCRIBE_CONFIGS, build(DESCRIBE_CONFIGS, resources=(res,), include_synonyms=True,
                                                         include_documentation=False))
    (result,) = answer.results
    check(result.error_code, result.error_message)
    return list(result.configs)


def _config(request: web.Request, cluster: Cluster, topic: str, config: Any) -> dict[str, Any]:
    cid = cluster.cluster_id
    source = CONFIG_SOURCES.get(config.config_source, "UNKNOWN")
    return resource(
        "KafkaTopicConfig", request, f"crn:///kafka={cid}/topic={topic}/config={config.name}",
        "v3", "clusters", cid, "topics", quoted(topic), "configs", config.name,
        cluster_id=cid, topic_name=topic, name=config.name,
        value=None if config.is_sensitive else config.value, is_default=source == "DEFAULT_CONFIG",
        is_read_only=config.read_only, is_sensitive=config.is_sensitive, source=source,
        synonyms=[{"name": s.name, "value": s.value, "source": CONFIG_SOURCES.get(s.source, "UNKNOWN")}
                  for s in config.synonyms],
    )


async def list_configs(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    name = kafka_name(request, request.match_info["topic"])
    configs = sorted(await topic_configs(cluster, name), key=lambda c: c.name)
    return listing("KafkaTopicConfigList", request, [_config(request, cluster, name, c) for c in configs])


async def get_config(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    name = kafka_name(request, request.match_info["topic"])
    wanted = request.match_info["name"]
    for config in await topic_configs(cluster, name):
        if config.name == wanted:
            return web.json_response(_config(request, cluster, name, config))
    raise not_found(f"Config {wanted} cannot be found for topic {name}.")


async def _alter(cluster: Cluster, name: str, changes: list[tuple[str, int, str | None]], validate_only: bool) -> None:
    """IncrementalAlterConfigs on one topic: (config, SET or DELETE, value)."""
    res = build(INCREMENTAL_ALTER_CONFIGS, "AlterConfigsResource", resource_type=TOPIC_RESOURCE, resource_name=name,
                configs=tuple(build(INCREMENTAL_ALTER_CONFIGS, "AlterableConfig", name=k, config_operation=op, value=v)
                              for k, op, v in changes))
    answer = await call(cluster, INCREMENTAL_ALTER_CONFIGS, build(INCREMENTAL_ALTER_CONFIGS, resources=(res,),
                                                                  validate_only=validate_only))
    (result,) = answer.responses
    check(result.error_code, result.error_message)


async def _existing_config(cluster: Cluster, topic: str, config: str) -> None:
    if all(c.name != config for c in await topic_configs(cluster, topic)):
        raise not_found(f"Config {config} cannot be found for topic {topic}.")


async def put_config(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    name, config = kafka_name(request, request.match_info["topic"]), request.match_info["name"]
    value = field(await read_json(request), "value", str, None)
    await _existing_config(cluster, name, config)
    await _alter(cluster, name, [(config, SET, value)], False)
    return web.Response(status=204)


async def reset_config(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    name, config = kafka_name(request, request.match_info["topic"]), request.match_info["name"]
    await _existing_config(cluster, name, config)
    await _alter(cluster, name, [(config, DELETE, None)], False)
    return web.Response(status=204)


async def alter_configs(request: web.Request) -> web.Response:
    """POST .../configs:alter: several SET/DELETE changes at once, or only validated."""
    cluster = cluster_of(request)
    name = kafka_name(request, request.match_info["topic"])
    body = await read_json(request)
    changes = []
    for item in field(body, "data", list, required=True):
        operation = str(field(item, "operation", str, "SET")).upper()
        if operation not in ("SET", "DELETE"):
            raise kafka_error(ErrorCode.invalid_request, f"Unknown operation {operation}")
        changes.append((field(item, "name", str, required=True), SET if operation == "SET" else DELETE,
                        field(item, "value", str, None)))
    await described_topic(request, cluster, name)
    await _alter(cluster, name, changes, field(body, "validate_only", bool, False))
    return web.Response(status=204)


# --- consumer groups and lag ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    assignment: dict[str, frozenset[int]]
    host: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class GroupView:
    """A classic group (DescribeGroups) or a KIP-848 consumer group (ConsumerGroupDescribe), alike."""

    group_id: str
    state: str  # Confluent's ConsumerGroupState name
    is_simple: bool
    assignor: str
    type: str  # CLASSIC or CONSUMER
    members: tuple[MemberView, ...]
    kafka_state: str = ""  # as Kafka names it (Stable, stable, ...)


async def describe_group(cluster: Cluster, group_id: str) -> GroupView:
    """The group as DescribeGroups sees it, or as ConsumerGroupDescribe does for a KIP-848 group; else 404."""
    answer = await coordinator_call(cluster, DESCRIBE_GROUPS, build(DESCRIBE_GROUPS, groups=(group_id,),
                                                                    include_authorized_operations=False), group_id)
    (group,) = answer.groups
    if group.error_code in NOT_FOUND_HERE:  # 403 as Confluent answers, or the coordinator's retriable error
        check(group.error_code)
    if group.error_code == 0 and group.group_state != "Dead":
        members = tuple(MemberView(m.member_id, m.group_instance_id, m.client_id,
                                   parse_assignment(m.member_assignment) or {}, m.client_host) for m in group.members)
        return GroupView(group.group_id, GROUP_STATES.get(group.group_state, "UNKNOWN"), group.protocol_type == "",
                         group.protocol_data, "CLASSIC", members, group.group_state)
    answer = await coordinator_call(cluster, CONSUMER_GROUP_DESCRIBE, build(
        CONSUMER_GROUP_DESCRIBE, group_ids=(group_id,), include_authorized_operations=False), group_id)
    (described,) = answer.groups
    if described.error_code != 0 or described.group_state == "Dead":
        raise not_found(f"Consumer group {group_id} cannot be found.")
    members = tuple(
        MemberView(m.member_id, m.instance_id, m.client_id,
                   {tp.topic_name: frozenset(tp.partitions) for tp in m.assignment.topic_partitions}, m.client_host)
        for m in described.members
    )
    state = described.group_state.upper() if described.group_state else "UNKNOWN"
    return GroupView(described.group_id, state, False, described.assignor_name, "CONSUMER", members,
                     described.group_state)


def _coordinator_id(cluster: Cluster, group_id: str) -> int:
    """The broker that coordinates the group (the leader of its __consumer_offsets partition: on the cloud
    engine a broker, with `serve --workers N` a worker), this one while none does."""
    coordinator = cluster.coordinator(group_id)
    return cluster.node_id if coordinator is None else coordinator.node_id


def _group(request: web.Request, cluster: Cluster, group: GroupView) -> dict[str, Any]:
    cid = cluster.cluster_id
    base = ("v3", "clusters", cid, "consumer-groups", quoted(group.group_id))
    return resource(
        "KafkaConsumerGroup", request, f"crn:///kafka={cid}/consumer-group={group.group_id}", *base,
        cluster_id=cid, consumer_group_id=group.group_id, is_simple=group.is_simple,
        partition_assignor=group.assignor, state=group.state, type=group.type, is_mixed_consumer_group=False,
        coordinator=related(request, "v3", "clusters", cid, "brokers", _coordinator_id(cluster, group.group_id)),
        consumers=related(request, *base, "consumers"), lag_summary=related(request, *base, "lag-summary"),
    )


async def cluster_groups(cluster: Cluster) -> list[Any]:
    """Every group of the cluster, as Kafka's admin client lists them: ListGroups asked of every live
    broker (each lists the groups it coordinates, and every broker the groups that only have
    offsets), each group as its coordinator lists it. A broker that cannot be reached is left out."""
    body = build(LIST_GROUPS, states_filter=(), types_filter=())
    answer = await call(cluster, LIST_GROUPS, body)
    check(answer.error_code)
    answers = {cluster.node_id: answer}
    others = [member for member in cluster.brokers() if member.node_id != cluster.node_id]
    for member, reply in zip(others, await asyncio.gather(*(peer_call(cluster, m, LIST_GROUPS, body) for m in others))):
        if reply is not None and reply.error_code == 0:
            answers[member.node_id] = reply
    found: dict[str, Any] = {}
    for node_id, reply in answers.items():
        for listed in reply.groups:
            coordinator = cluster.coordinator(listed.group_id)
            if listed.group_id not in found or (coordinator is not None and coordinator.node_id == node_id):
                found[listed.group_id] = listed
    return [found[group_id] for group_id in sorted(found)]


async def list_groups(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    data = []
    for listed in await cluster_groups(cluster):
        try:
            data.append(_group(request, cluster, await describe_group(cluster, listed.group_id)))
        except RestError:  # gone between the listing and its description
            continue
    return listing("KafkaConsumerGroupList", request, data)


async def get_group(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    return web.json_response(_group(request, cluster, await describe_group(cluster, request.match_info["group"])))


def _consumer(request: web.Request, cluster: Cluster, group_id: str, member: MemberView) -> dict[str, Any]:
    cid = cluster.cluster_id
    base = ("v3", "clusters", cid, "consumer-groups", quoted(group_id), "consumers", quoted(member.member_id))
    return resource(
        "KafkaConsumer", request, f"crn:///kafka={cid}/consumer-group={group_id}/consumer={member.member_id}",
        *base, cluster_id=cid, consumer_group_id=group_id, consumer_id=member.member_id,
        instance_id=member.instance_id, client_id=member.client_id,
        assignments=related(request, *base, "assignments"),
    )


async def list_consumers(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = await describe_group(cluster, request.match_info["group"])
    members = sorted(group.members, key=lambda m: m.member_id)
    return listing("KafkaConsumerList", request, [_consumer(request, cluster, group.group_id, m) for m in members])


def _member(group: GroupView, consumer_id: str) -> MemberView:
    for member in group.members:
        if member.member_id == consumer_id:
            return member
    raise not_found(f"Consumer {consumer_id} cannot be found in group {group.group_id}.")


async def get_consumer(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = await describe_group(cluster, request.match_info["group"])
    member = _member(group, request.match_info["consumer"])
    return web.json_response(_consumer(request, cluster, group.group_id, member))


async def list_assignments(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = await describe_group(cluster, request.match_info["group"])
    member = _member(group, request.match_info["consumer"])
    cid = cluster.cluster_id
    data = []
    for topic, partitions in sorted(member.assignment.items()):
        for index in sorted(partitions):
            data.append(resource(
                "KafkaConsumerAssignment", request,
                f"crn:///kafka={cid}/consumer-group={group.group_id}/consumer={member.member_id}"
                f"/assignment=topic={topic}/partition={index}",
                "v3", "clusters", cid, "consumer-groups", quoted(group.group_id), "consumers",
                quoted(member.member_id), "assignments", quoted(topic), "partitions", index,
                cluster_id=cid, consumer_group_id=group.group_id, consumer_id=member.member_id,
                topic_name=topic, partition_id=index,
                partition=related(request, "v3", "clusters", cid, "topics", quoted(topic), "partitions", index),
            ))
    return listing("KafkaConsumerAssignmentList", request, data)


async def log_end_offsets(cluster: Cluster, partitions: dict[str, set[int]]) -> dict[tuple[str, int], int]:
    """The log end offset of each partition, by ListOffsets(latest): on this broker, and on their leaders
    over the Kafka port for the partitions another broker leads (it answers NOT_LEADER_OR_FOLLOWER)."""
    if not partitions:
        return {}
    answer = await call(cluster, LIST_OFFSETS, list_offsets_request(partitions))
    elsewhere = {(t.name, p.partition_index) for t in answer.topics for p in t.partitions
                 if p.error_code == ErrorCode.not_leader_or_follower}
    answers = [answer, *await ask_leaders(cluster, LIST_OFFSETS, elsewhere, list_offsets_request)]
    return {(t.name, p.partition_index): p.offset for a in answers for t in a.topics for p in t.partitions
            if p.error_code == 0}


async def group_lags(cluster: Cluster, group: GroupView) -> list[dict[str, Any]]:
    """Per partition with a committed offset: the offset, the log end and the member it is assigned to."""
    spec = build(OFFSET_FETCH, "OffsetFetchRequestGroup", group_id=group.group_id, member_id=None, member_epoch=-1,
                 topics=None)
    answer = await coordinator_call(cluster, OFFSET_FETCH, build(OFFSET_FETCH, groups=(spec,), require_stable=False),
                                    group.group_id)
    (fetched,) = answer.groups
    check(fetched.error_code)
    committed = {(t.name, p.partition_index): p.committed_offset
                 for t in fetched.topics for p in t.partitions if p.committed_offset >= 0}
    owners = {}
    for member in group.members:
        for topic, indexes in member.assignment.items():
            for index in indexes:
                owners[topic, index] = member
    wanted: dict[str, set[int]] = {}
    for topic, index in committed:
        wanted.setdefault(topic, set()).add(index)
    ends = await log_end_offsets(cluster, wanted)
    lags = []
    for (topic, index), offset in sorted(committed.items()):
        end = ends.get((topic, index), offset)
        owner = owners.get((topic, index))
        lags.append({"topic_name": topic, "partition_id": index, "current_offset": offset, "log_end_offset": end,
                     "lag": max(end - offset, 0), "consumer_id": owner.member_id if owner else "",
                     "instance_id": owner.instance_id if owner else None,
                     "client_id": owner.client_id if owner else ""})
    return lags


async def list_lags(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = await describe_group(cluster, request.match_info["group"])
    cid = cluster.cluster_id
    data = [
        resource("KafkaConsumerLag", request,
                 f"crn:///kafka={cid}/consumer-group={group.group_id}/lag=topic={lag['topic_name']}"
                 f"/partition={lag['partition_id']}",
                 "v3", "clusters", cid, "consumer-groups", quoted(group.group_id), "lags",
                 quoted(lag["topic_name"]), "partitions", lag["partition_id"],
                 cluster_id=cid, consumer_group_id=group.group_id, **lag)
        for lag in await group_lags(cluster, group)
    ]
    return listing("KafkaConsumerLagList", request, data)


async def lag_summary(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    group = await describe_group(cluster, request.match_info["group"])
    lags = await group_lags(cluster, group)
    cid = cluster.cluster_id
    worst = max(lags, key=lambda lag: lag["lag"], default=None)
    base = ("v3", "clusters", cid, "consumer-groups", quoted(group.group_id))
    summary = resource(
        "KafkaConsumerGroupLagSummary", request, f"crn:///kafka={cid}/consumer-group={group.group_id}/lag-summary",
        *base, "lag-summary", cluster_id=cid, consumer_group_id=group.group_id,
        max_lag_consumer_id=worst["consumer_id"] if worst else "",
        max_lag_instance_id=worst["instance_id"] if worst else None,
        max_lag_client_id=worst["client_id"] if worst else "",
        max_lag_topic_name=worst["topic_name"] if worst else "",
        max_lag_partition_id=worst["partition_id"] if worst else 0,
        max_lag=worst["lag"] if worst else 0, total_lag=sum(lag["lag"] for lag in lags),
    )
    if worst:
        summary["max_lag_consumer"] = related(request, *base, "consumers", quoted(worst["consumer_id"]))
        summary["max_lag_partition"] = related(request, "v3", "clusters", cid, "topics",
                                               quoted(worst["topic_name"]), "partitions", worst["partition_id"])
    return web.json_response(summary)


CLUSTER = "/v3/clusters/{cluster_id}"
TOPIC = CLUSTER + "/topics/{topic}"
GROUP = CLUSTER + "/consumer-groups/{group}"


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/v3/clusters", list_clusters)
    r.add_get(CLUSTER, get_cluster)
    r.add_get(CLUSTER + "/brokers", list_brokers)
    r.add_get(CLUSTER + "/brokers/{broker_id}", get_broker)
    r.add_get(CLUSTER + "/topics", list_topics)
    r.add_post(CLUSTER + "/topics", create_topic)
    r.add_get(TOPIC, get_topic)
    r.add_delete(TOPIC, delete_topic)
    r.add_patch(TOPIC, update_topic)
    r.add_get(TOPIC + "/partitions", list_partitions)
    r.add_get(TOPIC + "/partitions/{partition_id}", get_partition)
    r.add_get(TOPIC + "/configs", list_configs)
    r.add_post(TOPIC + "/configs:alter", alter_configs)
    r.add_get(TOPIC + "/configs/{name}", get_config)
    r.add_put(TOPIC + "/configs/{name}", put_config)
    r.add_delete(TOPIC + "/configs/{name}", reset_config)
    r.add_get(CLUSTER + "/consumer-groups", list_groups)
    r.add_get(GROUP, get_group)
    r.add_get(GROUP + "/consumers", list_consumers)
    r.add_get(GROUP + "/consumers/{consumer}", get_consumer)
    r.add_get(GROUP + "/consumers/{consumer}/assignments", list_assignments)
    r.add_get(GROUP + "/lags", list_lags)
    r.add_get(GROUP + "/lag-summary", lag_summary)
