"""DeleteTopics: by name (v1-5) or by name or topic id (v6)."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..security.acls import Operation
from ..security.authorizer import TOPIC_DENIED
from ..services import Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, changes

# DeleteTopics v1-6
API = Api(20, (1, 6), changes(("topics", "topic_names"), "responses"))


class Reaches(Topics, Security, Protocol):
    """What of the broker this module reaches."""


async def _delete(ctx: Request[Reaches], name: str | None, topic_id: Any) -> tuple[ErrorCode, str | None, Any, Any]:
    cluster = ctx.cluster
    if name is None:
        info = cluster.by_id(topic_id) if topic_id is not None else None
        if info is None:
            return ErrorCode.unknown_topic_id, "unknown topic id", None, topic_id
        if not cluster.authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name):
            return ErrorCode.topic_authorization_failed, TOPIC_DENIED, None, topic_id
        shown = cluster.listed_name(info.stream, info.name, ctx.client_software_name)
        if not cluster.authorizer.known_topic(ctx, Operation.DELETE, info.stream, info.name):
            return ErrorCode.topic_authorization_failed, TOPIC_DENIED, shown, topic_id
    else:
        if not cluster.authorizer.topic(ctx, Operation.DESCRIBE, name):  # existence is not disclosed
            return ErrorCode.topic_authorization_failed, TOPIC_DENIED, name, topic_id
        try:
            info = cluster.lookup(name).info
        except TopicError as exc:
            return exc.code, str(exc), name, topic_id
        if info is None:
            return ErrorCode.unknown_topic_or_partition, f"topic {name} does not exist", name, topic_id
        if not cluster.authorizer.topic(ctx, Operation.DELETE, name):
            return ErrorCode.topic_authorization_failed, TOPIC_DENIED, name, topic_id
    try:
        await cluster.store.delete_topic(info.stream, info.name)
    except storage.StorageError as exc:
        return storage_error_code(exc), str(exc), name, info.topic_id
    cluster.forget_topic(info)
    return ErrorCode.none, None, name or cluster.listed_name(info.stream, info.name, ctx.client_software_name), info.topic_id


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id if t.topic_id and t.topic_id.int else None) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        error, message, shown, tid = await _delete(ctx, name, topic_id)
        results.append(
            make(m.DeletableTopicResult, name=shown, topic_id=tid, error_code=error, error_message=message)
        )
    return make(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
