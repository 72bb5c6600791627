"""CreateTopics: a topic in a stream, with the stream's defaults filling gaps.

The topics of one request are checked one after another, created together (one store call per
stream: on the cloud engine one transaction, where a topic's own made a thousand-topic request
cost six thousand database round trips; issue 32), then their partitions get leaders together
(`settle`) before the answer: on the cloud engine each settle is a tick of the leader table, which
reads every partition's row, so one per topic made creating N topics cost N ticks of N rows (11-58
topics/s at 200 topics, batches of 20; issue 32)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Protocol

from kafkacompat import storage
from kafkacompat.storage import NewTopic

from ..broker.cluster import TopicError
from ..catalog.topic_configs import InvalidConfigError, effective_configs, validate_configs
from ..security.acls import Operation
from ..security.authorizer import TOPIC_DENIED
from ..services import Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .partition_limits import PER_REQUEST_MESSAGE, partition_limit_error
from .registry import Api, changes

DUPLICATE_MESSAGE = "Duplicate topic name."  # Kafka's words

# CreateTopics v2-7
API = Api(19, (2, 7), changes(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""


Outcome = tuple[ErrorCode, str | None, Any]  # error, its message, the created topic's TopicInfo


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """A topic that passed the checks, to create in `stream`."""

    stream: str
    topic: NewTopic


def _check(ctx: Request[Reaches], topic: Any, validate_only: bool, pending: int) -> Outcome | _Plan:
    """The topic to create, or why not (Kafka's checks, in Kafka's order); `pending` partitions of
    the request's earlier topics are about to be created."""
    cluster = ctx.cluster
    authorizer = cluster.authorizer
    if authorizer.enabled and not (authorizer.cluster(ctx, Operation.CREATE, log_denied=False)
                                   or authorizer.topic(ctx, Operation.CREATE, topic.name)):
        return ErrorCode.topic_authorization_failed, TOPIC_DENIED, None
    try:
        stream, name = cluster.split(topic.name)
    except TopicError as exc:
        return exc.code, str(exc), None
    stream_info = cluster.store.get_stream(stream)
    if stream_info is None:
        return ErrorCode.invalid_topic_exception, f"stream {stream} does not exist", None
    if cluster.store.get_topic(stream, name) is not None:
        return ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.", None  # Kafka's wording
    partitions = topic.num_partitions
    if topic.assignments:
        partitions = len(topic.assignments)
        if any(set(a.broker_ids) - {cluster.node_id} for a in topic.assignments):
            return ErrorCode.invalid_replica_assignment, f"broker {cluster.node_id} is the only broker", None
    if partitions == -1:
        partitions = stream_info.policy.default_partitions
    if partitions <= 0:
        return ErrorCode.invalid_partitions, f"number of partitions must be positive, got {partitions}", None
    if topic.replication_factor not in (-1, 1) and not topic.assignments:
        return (
            ErrorCode.invalid_replication_factor,
            f"replication factor {topic.replication_factor} is larger than the 1 available broker",
            None,
        )
    refused = partition_limit_error(cluster, partitions, pending)
    if refused is not None:
        return *refused, None
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        validate_configs(configs)
    except InvalidConfigError as exc:
        return ErrorCode.invalid_config, str(exc), None
    if validate_only:
        return ErrorCode.none, None, None
    return _Plan(stream, NewTopic(name, partitions, configs))


async def _create_all(ctx: Request[Reaches], request: Any) -> list[tuple[str, Outcome]]:
    """Each topic's name and outcome, in the request's order, then a name given more than once,
    answered once, after the others, INVALID_REQUEST and none of its topics created (Kafka's
    ControllerApis). The topics that pass the checks are created together, one store call per
    stream (one catalog write for the lot)."""
    cluster = ctx.cluster
    counts = collections.Counter(topic.name for topic in request.topics)
    topics = [topic for topic in request.topics if counts[topic.name] == 1]
    twice: list[tuple[str, Outcome]] = [(name, (ErrorCode.invalid_request, DUPLICATE_MESSAGE, None))
                                        for name, n in counts.items() if n > 1]
    if _requested_partitions(ctx, topics) > cluster.config.max_partitions_per_request:  # Kafka refuses all
        refused: Outcome = (ErrorCode.policy_violation, PER_REQUEST_MESSAGE, None)
        return [(topic.name, refused) for topic in topics] + twice
    outcomes: list[Outcome | _Plan] = []
    by_stream: dict[str, list[int]] = {}
    pending = 0
    for topic in topics:
        checked = _check(ctx, topic, request.validate_only, pending)
        if isinstance(checked, _Plan):
            pending += checked.topic.partitions
            by_stream.setdefault(checked.stream, []).append(len(outcomes))
        outcomes.append(checked)
    for stream, places in by_stream.items():
        made = await cluster.store.create_topics(stream, [p.topic for i in places if isinstance(p := outcomes[i], _Plan)])
        for place, result in zip(places, made):
            outcomes[place] = ((storage_error_code(result), str(result), None) if isinstance(result, storage.StorageError)
                               else (ErrorCode.none, None, result))
    return [(topic.name, o) for topic, o in zip(topics, outcomes) if not isinstance(o, _Plan)] + twice


def _requested_partitions(ctx: Request[Reaches], topics: Any) -> int:
    """Partitions the whole request asks for, counted as Kafka's controller counts them."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions > 0:
            total += topic.num_partitions
        elif topic.num_partitions == -1:
            try:
                stream = ctx.cluster.store.get_stream(ctx.cluster.split(topic.name)[0])
            except TopicError:
                continue
            total += stream.policy.default_partitions if stream is not None else 0
    return total


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    results = []
    outcomes = await _create_all(ctx, request)
    await ctx.cluster.settle([info for _, (_, _, info) in outcomes if info is not None])  # leaders before the answer
    for topic_name, (error, message, info) in outcomes:
        configs = None
        config_error = ErrorCode.none
        if info is not None and not ctx.cluster.authorizer.topic(ctx, Operation.DESCRIBE_CONFIGS, topic_name,
                                                                 log_denied=False):
            config_error = ErrorCode.topic_authorization_failed  # created, but its configs are not shown
        elif info is not None and hasattr(m, "CreatableTopicConfigs"):  # v5+
            configs = tuple(
                make(
                    m.CreatableTopicConfigs, name=name, value=value, read_only=False,
                    config_source=source, is_sensitive=False,
                )
                for name, (value, source) in effective_configs(ctx.cluster, info).items()
            )
        results.append(
            make(
                m.CreatableTopicResult,
                name=topic_name,
                topic_id=info.topic_id if info else None,
                error_code=error,
                error_message=message,
                topic_config_error_code=config_error,
                num_partitions=info.partitions if info else -1,
                replication_factor=1 if info else -1,
                configs=configs,
            )
        )
    return make(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))
