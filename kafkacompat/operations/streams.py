"""The stream, topic and cursor operations: stream.create ... cursor.delete, and replication's, by name.

Each checks its input completely before changing anything, so a refused request leaves the store as it
was; `run` authorizes it for `ctx.principal` first (MapR's stream permissions, or the Kafka ACL of the same
operation). Three front doors call it: the StreamAdmin request of the admin CLI (handlers/stream_admin.py),
the web console's forms, and their permission checks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.storage import StreamPolicy

from ..broker import admin_log
from ..broker.cluster import Cluster
from ..catalog.topic_configs import InvalidConfigError, validate_configs
from ..replication.admin_ops import OPS as REPLICATION_OPS
from ..security.acls import Operation
from ..security.authorizer import STREAM_PERMISSIONS, deny
from ..security.principal import ANONYMOUS
from .stream_views import PolicyFieldError, cursor_views, policy_with, stream_view, topic_view, topic_views

if TYPE_CHECKING:
    from kafkacompat.protocol.admin_api import AdminReply
    from kafkacompat.protocol.messages import RequestHeader


class Caller(Protocol):
    """Who runs an operation, as the authorizer and the admin log read it: a StreamAdmin request of the Kafka
    port (the connection's RequestContext) or a console form's caller (http.principal.HttpCaller)."""

    @property
    def cluster(self) -> Cluster: ...

    @property
    def principal(self) -> str: ...

    @property
    def peer(self) -> str: ...

    @property
    def entry(self) -> str: ...

    @property
    def header(self) -> RequestHeader | None: ...


class AdminError(Exception):
    """A refused admin request, answered with a Kafka error code and a message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


async def run(ctx: Caller, request: dict[str, Any]) -> Any:
    """One operation as `ctx.principal` (the admin CLI's, or a console form's): authorized, then done.

    AdminError (and the store's errors) when refused; a listing holds only what the principal may see.
    """
    op_name = request["op"]
    op = OPS.get(op_name)
    if op is None:
        raise AdminError(ErrorCode.invalid_request, f"unknown admin operation {op_name!r}")
    _authorize(ctx, op_name, request)
    if op_name == "stream.create":
        _default_permissions(ctx, request)
    forwarded = await ctx.cluster.view.admin_at_controller(request)  # judged here, as the client
    if forwarded is not None:
        result = _answer_of(forwarded)
    elif ctx.header is not None:  # a Kafka request: the connection logs the change
        result = await op(ctx.cluster, request)
    else:
        result = await _logged(ctx, op, request)
    if op_name in FILTERED:
        result = [item for item in result if FILTERED[op_name](ctx, item)]
    return result


def _answer_of(reply: AdminReply) -> Any:
    """The result of an operation the controller ran for this broker; AdminError with its refusal."""
    if reply.error_code == 0:
        return reply.result
    try:
        code = ErrorCode(reply.error_code)
    except ValueError:
        code = ErrorCode.unknown_server_error
    raise AdminError(code, reply.error or code.name)


async def _logged(ctx: Caller, op: Callable[[Cluster, dict[str, Any]], Awaitable[Any]], request: dict[str, Any]) -> Any:
    """Run a change asked outside the Kafka port (a console form) and log it once, as the port's are."""
    try:
        result = await op(ctx.cluster, request)
    except Exception as exc:
        admin_log.stream_admin_change(ctx, request, f"failed: {exc}")
        raise
    admin_log.stream_admin_change(ctx, request, "ok")
    return result


# authorization: MapR's stream permissions, or the Kafka ACL of the same operation ---------------------

# op -> (stream permission that grants it, Kafka operation on the cluster that grants it too)
_STREAM_OPS = {
    "stream.edit": ("admin", Operation.ALTER),
    "stream.delete": ("admin", Operation.ALTER),
    "stream.purge": ("admin", Operation.ALTER),
    "cursor.delete": ("admin", Operation.ALTER),
    # replication (kafkacompat/replication): copying a stream out takes its copy permission, as on MapR
    "replica.add": ("copy", Operation.ALTER),
    "replica.edit": ("copy", Operation.ALTER),
    "replica.pause": ("copy", Operation.ALTER),
    "replica.resume": ("copy", Operation.ALTER),
    "replica.remove": ("copy", Operation.ALTER),
    "upstream.add": ("admin", Operation.ALTER),
    "upstream.remove": ("admin", Operation.ALTER),
}
_TOPIC_OPS = {"topic.create": Operation.CREATE, "topic.edit": Operation.ALTER, "topic.delete": Operation.DELETE,
              "topic.info": Operation.DESCRIBE}


def may_see_stream(ctx: Caller, path: str) -> bool:
    """Any of the stream's permissions, or DESCRIBE on the cluster, lets a principal see a stream."""
    authorizer = ctx.cluster.authorizer
    return (any(authorizer.stream_allows(ctx.principal, path, p) for p in STREAM_PERMISSIONS)
            or authorizer.cluster(ctx, Operation.DESCRIBE, log_denied=False))


def _authorize(ctx: Caller, op_name: str, request: dict[str, Any]) -> None:
    """Refuse an operation the principal may not do, with one audit line; only when authorization is on."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.enabled:
        return
    if op_name == "stream.create":
        if not authorizer.cluster(ctx, Operation.CREATE):
            raise AdminError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not create streams (needs CREATE on the cluster)")
    elif op_name in _STREAM_OPS:
        path = _arg(request, "path", str)
        permission, operation = _STREAM_OPS[op_name]
        if not (authorizer.stream_allows(ctx.principal, path, permission)
                or authorizer.cluster(ctx, operation, log_denied=False)):
            deny(ctx, f"{permission} permission", "STREAM", path)
            raise AdminError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not {op_name.replace('.', ' ')} of stream {path} "
                             f"(needs the stream's {permission} permission)")
    elif op_name == "cluster.info":
        if not authorizer.cluster(ctx, Operation.DESCRIBE):
            raise AdminError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not describe the cluster (needs DESCRIBE on it)")
    elif op_name in ("stream.info", "topic.list", "cursor.list", "replica.list", "upstream.list"):
        path = _arg(request, "path", str)
        if not may_see_stream(ctx, path):
            deny(ctx, Operation.DESCRIBE, "STREAM", path)
            raise AdminError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not see stream {path} (needs one of its permissions)")
    elif op_name in _TOPIC_OPS:
        name = _arg(request, "name", str)
        wanted = [_TOPIC_OPS[op_name]] + ([Operation.ALTER_CONFIGS] if op_name == "topic.edit"
                                          and request.get("configs") else [])  # as AlterConfigs asks
        for operation in wanted:
            if not authorizer.topic(ctx, operation, name):
                raise AdminError(ErrorCode.topic_authorization_failed, f"Authorization failed on topic {name}: "
                                 f"{ctx.principal} may not {operation.name} it")
    elif op_name != "stream.list":  # (a listing shows only what the principal may see: FILTERED)
        # an operation not named above is for those who may alter the cluster, until it says otherwise
        if not authorizer.cluster(ctx, Operation.ALTER):
            raise AdminError(ErrorCode.cluster_authorization_failed,
                             f"{ctx.principal} may not {op_name} (needs ALTER on the cluster)")


def _default_permissions(ctx: Caller, request: dict[str, Any]) -> None:
    """MapR's defaults: a stream created by an authenticated user grants each unset permission to u:<user>."""
    if not ctx.cluster.authorizer.enabled or ctx.principal == ANONYMOUS or not ctx.principal.startswith("User:"):
        return
    policy = request.get("policy")
    if policy is None:
        policy = request["policy"] = {}
    if not isinstance(policy, dict):
        return  # refused with a clear message by _policy
    given = policy.get("permissions") or {}
    if isinstance(given, dict):
        policy["permissions"] = {p: given.get(p) or f"u:{ctx.principal[5:]}" for p in STREAM_PERMISSIONS}


FILTERED: dict[str, Callable[[Any, dict[str, Any]], bool]] = {
    "stream.list": lambda ctx, view: may_see_stream(ctx, view["path"]),
    "topic.list": lambda ctx, view: ctx.cluster.authorizer.topic(ctx, Operation.DESCRIBE, view["name"],
                                                                 log_denied=False),
}


# arguments ---------------------------------------------------------------------


def _arg(request: dict[str, Any], name: str, kind: type, required: bool = True) -> Any:
    value = request.get(name)
    if value is None:
        if required:
            raise AdminError(ErrorCode.invalid_request, f"missing {name!r}")
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise AdminError(ErrorCode.invalid_request, f"{name!r} must be {kind.__name__}, got {value!r}")
    return value


def _stream(cluster: Cluster, request: dict[str, Any], name: str = "path") -> str:
    path = _arg(request, name, str)
    storage.names.check_stream_path(path)
    _stream_info(cluster, path)
    return path


def _stream_info(cluster: Cluster, path: str) -> storage.StreamInfo:
    info = cluster.store.get_stream(path)
    if info is None:
        raise storage.UnknownStreamError(f"stream {path} does not exist")
    return info


def _topic_info(cluster: Cluster, stream: str, topic: str) -> storage.TopicInfo:
    info = cluster.store.get_topic(stream, topic)
    if info is None:
        raise storage.UnknownTopicError(f"topic {topic} does not exist in stream {stream}")
    return info


def _policy(base: StreamPolicy, request: dict[str, Any]) -> StreamPolicy:
    try:
        return policy_with(base, _arg(request, "policy", dict, required=False) or {})
    except PolicyFieldError as exc:
        raise AdminError(ErrorCode.invalid_request, str(exc)) from None


def _topic(cluster: Cluster, request: dict[str, Any], must_exist: bool = True) -> tuple[str, str]:
    """(stream, topic) for the request's `name` in any Kafka spelling; the stream must exist."""
    stream, topic = cluster.split(_arg(request, "name", str))
    _stream_info(cluster, stream)
    if must_exist:
        _topic_info(cluster, stream, topic)
    return stream, topic


def _partitions(request: dict[str, Any]) -> int | None:
    count = _arg(request, "partitions", int, required=False)
    if count is not None and count < 1:
        raise AdminError(ErrorCode.invalid_partitions, f"number of partitions must be at least 1, not {count}")
    return count


def _configs(request: dict[str, Any], current: dict[str, str]) -> dict[str, str] | None:
    """The topic's configs after the request's changes (a null value removes one), or None if unchanged."""
    changes = _arg(request, "configs", dict, required=False)
    if not changes:
        return None
    merged = dict(current)
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = str(value)
    try:
        validate_configs(merged)
    except InvalidConfigError as exc:
        raise AdminError(ErrorCode.invalid_config, str(exc)) from None
    return merged


# streams -----------------------------------------------------------------------


async def stream_create(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _arg(request, "path", str)
    info = await cluster.store.create_stream(path, _policy(StreamPolicy(), request))
    return stream_view(info)


async def stream_edit(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    current = _stream_info(cluster, path)
    info = await cluster.store.edit_stream(path, _policy(current.policy, request))
    return stream_view(info)


async def stream_info(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    view = stream_view(_stream_info(cluster, path))
    view["default_stream"] = path == cluster.default_stream
    return view


async def stream_list(cluster: Cluster, request: dict[str, Any]) -> Any:
    prefix = _arg(request, "prefix", str, required=False) or "/"
    under = prefix.rstrip("/") + "/"
    return [
        stream_view(info)
        for info in cluster.store.list_streams()
        if info.path == prefix or info.path.startswith(under)
    ]


async def stream_delete(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    await cluster.store.delete_stream(path)
    return {"path": path}


async def stream_purge(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    await cluster.store.purge_stream(path)
    return stream_view(_stream_info(cluster, path))


# topics ------------------------------------------------------------------------


async def topic_create(cluster: Cluster, request: dict[str, Any]) -> Any:
    stream, topic = _topic(cluster, request, must_exist=False)
    if cluster.store.get_topic(stream, topic) is not None:
        raise storage.TopicExistsError(f"topic {topic} already exists in stream {stream}")
    partitions = _partitions(request) or _stream_info(cluster, stream).policy.default_partitions
    configs = _configs(request, {}) or {}
    info = await cluster.store.create_topic(stream, topic, partitions, configs)
    await cluster.settle([info])
    return await topic_view(cluster, info, detail=False)


async def topic_edit(cluster: Cluster, request: dict[str, Any]) -> Any:
    stream, topic = _topic(cluster, request)
    current = _topic_info(cluster, stream, topic)
    partitions = _partitions(request)
    configs = _configs(request, current.configs)
    if partitions is None and configs is None:
        raise AdminError(ErrorCode.invalid_request, "nothing to change: give partitions or configs")
    if partitions is not None and partitions <= current.partitions:
        raise storage.InvalidPartitionsError(
            f"topic {topic} has {current.partitions} partition(s); partitions can only be added, "
            f"not set to {partitions}"
        )
    info = current
    if partitions is not None:
        info = await cluster.store.add_partitions(stream, topic, partitions)
        await cluster.settle([info])
    if configs is not None:
        info = await cluster.store.set_topic_configs(stream, topic, configs)
    return await topic_view(cluster, info, detail=False)


async def topic_info(cluster: Cluster, request: dict[str, Any]) -> Any:
    stream, topic = _topic(cluster, request)
    return await topic_view(cluster, _topic_info(cluster, stream, topic), detail=True)


async def topic_list(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    topics = sorted(cluster.store.list_topics(path), key=lambda t: t.name)
    return await topic_views(cluster, topics, detail=False)


async def topic_delete(cluster: Cluster, request: dict[str, Any]) -> Any:
    stream, topic = _topic(cluster, request)
    await cluster.store.delete_topic(stream, topic)
    return {"stream": stream, "topic": topic}


# cursors -----------------------------------------------------------------------


def _cursor_filter(request: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    group = _arg(request, "group", str, required=False)
    topic = _arg(request, "topic", str, required=False)
    partition = _arg(request, "partition", int, required=False)
    if partition is not None and topic is None:
        raise AdminError(ErrorCode.invalid_request, "a partition needs its topic")
    return group, topic, partition


async def cursor_list(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    group, topic, partition = _cursor_filter(request)
    store = cluster.store
    groups = [group] if group is not None else store.list_cursor_groups(path)
    return await cursor_views(cluster, [
        (path, g, c)
        for g in groups
        for c in sorted(store.get_cursors(path, g), key=lambda c: (c.topic, c.partition))
        if (topic is None or c.topic == topic) and (partition is None or c.partition == partition)
    ])


async def cursor_delete(cluster: Cluster, request: dict[str, Any]) -> Any:
    path = _stream(cluster, request)
    group, topic, partition = _cursor_filter(request)
    if group is None:
        raise AdminError(ErrorCode.invalid_request, "missing 'group': name the consumer group whose cursors go")
    store = cluster.store
    cursors = store.get_cursors(path, group)
    chosen = [
        (c.topic, c.partition)
        for c in cursors
        if (topic is None or c.topic == topic) and (partition is None or c.partition == partition)
    ]
    if not chosen:
        raise AdminError(ErrorCode.group_id_not_found, f"group {group} has no matching cursors in stream {path}")
    await store.delete_cursors(path, group, None if len(chosen) == len(cursors) else chosen)
    return {"stream": path, "group": group, "deleted": [{"topic": t, "partition": p} for t, p in chosen]}


OPS: dict[str, Callable[[Cluster, dict[str, Any]], Awaitable[Any]]] = {
    "stream.create": stream_create,
    "stream.edit": stream_edit,
    "stream.info": stream_info,
    "stream.list": stream_list,
    "stream.delete": stream_delete,
    "stream.purge": stream_purge,
    "topic.create": topic_create,
    "topic.edit": topic_edit,
    "topic.info": topic_info,
    "topic.list": topic_list,
    "topic.delete": topic_delete,
    "cursor.list": cursor_list,
    "cursor.delete": cursor_delete,
}
OPS.update(REPLICATION_OPS)  # stream replica|upstream, cluster info (kafkacompat/replication)
