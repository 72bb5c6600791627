"""The console's pages (GET): each reads the broker's state and renders one template.

With an authorizer a page shows only what the request's principal may
describe (permission.py), as the REST proxy's listings do, and a page of
something it may not see answers 403 before saying whether that exists.
"""

from __future__ import annotations

import time
from urllib.parse import urlencode

from aiohttp import web

from kafkacompat import storage

from ...broker.cluster import Cluster
from ...operations.stream_views import POLICY_FIELDS, stream_view, topic_view, topic_views
from ...security.acls import Operation
from ...topic_names import canonical_name
from ..common import BROKER
from ..rest_errors import RestError
from . import group_reset
from .groups_view import group_ids, group_view
from .permission import authorizing, form_refusal, may_group, may_see_broker, may_see_stream, may_topic, refusal
from .render import render
from .topology import topology_svg

TOPICS_PER_PAGE = 100  # a stream may hold a million topics: its page lists them a hundred at a time
MAX_FORM_BYTES = 64 * 1024
OFFSETS_PER_PAGE = 100  # a group's committed partitions, a hundred at a time (its total lag counts them all)
FSYNC_CHOICES = [policy.value for policy in storage.FsyncPolicy]
CLEANUP_CHOICES = ["delete", "compact", "compact,delete"]


def cluster_of(request: web.Request) -> Cluster:
    cluster = request.app[BROKER].cluster
    if cluster is None:
        raise web.HTTPServiceUnavailable(reason="the store is not open (yet)")
    return cluster


def not_found(request: web.Request, message: str) -> web.Response:
    return render(request, "not_found.html", status=404, title="Not found", message=message)


def forbidden(request: web.Request, message: str) -> web.Response:
    return render(request, "not_found.html", status=403, title="Forbidden", message=message)


def visible_topics(request: web.Request, topics: list[storage.TopicInfo]) -> list[storage.TopicInfo]:
    """The topics the principal may describe (all without an authorizer)."""
    if not authorizing(request):
        return topics
    return [t for t in topics if may_topic(request, Operation.DESCRIBE, t.stream, t.name, audit=False)]


def visible_groups(request: web.Request, groups: list[str]) -> list[str]:
    if not authorizing(request):
        return groups
    return [g for g in groups if may_group(request, Operation.DESCRIBE, g, audit=False)]


# The create form starts from the store's own defaults (ttl 7 days, as on MapR), so it cannot disagree with them.
_NEW_STREAM = {name: value for name, value in stream_view(storage.StreamInfo("", storage.StreamPolicy(), 0, 0)).items()
               if name in ("ttl_seconds", "default_partitions", "autocreate", "fsync", "cleanup_policy")}


async def home(request: web.Request, error: str | None = None, form: dict | None = None,
               status: int = 200) -> web.Response:
    cluster = cluster_of(request)
    store = cluster.store
    streams = [stream_view(info) for info in sorted(store.list_streams(), key=lambda s: s.path)
               if not authorizing(request) or may_see_stream(request, info.path, audit=False)]
    volumes = [{"path": v.path, "free_bytes": v.free_bytes()} for v in getattr(store, "volumes", ())]
    return render(request, "home.html", status=status, title="Streams", streams=streams, volumes=volumes,
                  default_stream=cluster.default_stream, store_url=cluster.config.store_url,
                  groups=len(visible_groups(request, [row["group"] for row in await group_ids(cluster)])),
                  topics=len(visible_topics(request, store.list_topics())),
                  broker_charts=may_see_broker(request, audit=False),
                  denied=await refusal(request, None), fsync_choices=FSYNC_CHOICES,
                  cleanup_choices=CLEANUP_CHOICES, form=form or _NEW_STREAM, error=error)


async def stream(request: web.Request, error: str | None = None, form: dict | None = None,
                 status: int = 200) -> web.Response:
    cluster = cluster_of(request)
    path = request.query.get("path", "")
    if authorizing(request) and not may_see_stream(request, path):
        return forbidden(request, f"you may not see stream {path!r} (it needs one of its permissions)")
    info = cluster.store.get_stream(path) if path.startswith("/") else None
    if info is None:
        return not_found(request, f"stream {path!r} does not exist")
    start = max(_int(request.query.get("start"), 0), 0)
    names = sorted(visible_topics(request, cluster.store.list_topics(path)), key=lambda t: t.name)
    groups = sorted(visible_groups(request, list(cluster.store.list_cursor_groups(path))))
    shown = names[start:start + TOPICS_PER_PAGE]
    topics = await topic_views(cluster, shown, detail=False)
    replicas = ([await link.status() for link in cluster.replication.links_of(path)]
                if cluster.replication is not None else [])
    upstreams = sorted(cluster.replication.upstreams(path)) if cluster.replication is not None else []
    return render(request, "stream.html", status=status, title=path, stream=stream_view(info),
                  replicas=replicas, upstreams=upstreams,
                  topology=topology_svg(path, upstreams, replicas) if replicas or upstreams else None,
                  default_stream=cluster.default_stream, topics=topics, start=start, total=len(names),
                  page=TOPICS_PER_PAGE, groups=groups,
                  denied=await refusal(request, path), fsync_choices=FSYNC_CHOICES,
                  cleanup_choices=CLEANUP_CHOICES, policy_fields=POLICY_FIELDS, error=error, form=form or {})


def topic_asked(request: web.Request, operation: Operation = Operation.DESCRIBE,
                 ) -> tuple[storage.TopicInfo | None, web.Response | None]:
    """The topic the ?stream=&topic= query names if the principal may do `operation` on it, else the page to answer."""
    stream_path, name = request.query.get("stream", ""), request.query.get("topic", "")
    if authorizing(request) and not may_topic(request, operation, stream_path, name):
        return None, forbidden(request, f"you may not {operation.name} topic {name!r} of stream {stream_path!r}")
    info = cluster_of(request).store.get_topic(stream_path, name) if stream_path.startswith("/") and name else None
    if info is None:
        return None, not_found(request, f"topic {name!r} does not exist in stream {stream_path!r}")
    return info, None


async def topic(request: web.Request, error: str | None = None, form: dict | None = None,
                status: int = 200) -> web.Response:
    cluster = cluster_of(request)
    info, missing = topic_asked(request)
    if info is None:
        return missing
    view = await topic_view(cluster, info, detail=True)
    denied = await refusal(request, info.stream)
    may_delete = (may_topic(request, Operation.DELETE, info.stream, info.name, audit=False)
                  if authorizing(request) else denied is None)
    return render(request, "topic.html", status=status, title=view["name"], topic=view, denied=denied,
                  may_delete=may_delete, error=error, form=form or {}, low=request.query.get("low"))


async def groups(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    rows = await group_ids(cluster)
    allowed = set(visible_groups(request, [row["group"] for row in rows]))
    rows = [row for row in rows if row["group"] in allowed]
    for row in rows:
        try:
            view = await group_view(cluster, row["group"])
        except RestError:  # its coordinator could not be asked: listed without figures
            view = None
        row["members"] = len(view["members"]) if view else 0
        row["lag"] = view["total_lag"] if view else 0
    return render(request, "groups.html", title="Consumer groups", groups=rows)


async def group(request: web.Request, error: str | None = None, status: int = 200) -> web.Response:
    cluster = cluster_of(request)
    group_id = request.query.get("id", "")
    if authorizing(request) and not may_group(request, Operation.DESCRIBE, group_id):
        return forbidden(request, f"you may not DESCRIBE consumer group {group_id!r}")
    try:
        view = await group_view(cluster, group_id) if group_id else None
    except RestError as exc:  # its coordinator could not be asked
        return render(request, "not_found.html", status=exc.status, title="Unavailable", message=exc.message)
    if view is None:
        return not_found(request, f"consumer group {group_id!r} is unknown")
    if authorizing(request):  # as OffsetFetch: only the committed offsets of topics the principal may describe
        view["offsets"] = [row for row in view["offsets"]
                           if may_topic(request, Operation.DESCRIBE, row["stream"], row["topic"], audit=False)]
        view["total_lag"] = sum(row["lag"] or 0 for row in view["offsets"])
    start = max(_int(request.query.get("start"), 0), 0)
    total = len(view["offsets"])
    view["offsets"] = view["offsets"][start:start + OFFSETS_PER_PAGE]
    reset = {name: request.query.get("reset_" + name, "") for name in ("mode", "value", "topic")}
    preview = None
    may_reset = await _may_reset(request, group_id)
    if may_reset and reset["mode"] and error is None:
        try:  # the dry run: what a reset would commit
            preview = await group_reset.plan(request, cluster, group_id, reset["mode"], reset["value"],
                                             reset["topic"])
        except group_reset.ResetError as exc:
            error, status = str(exc), 400
    return render(request, "group.html", status=status, title=f"Group {group_id}", group=view, start=start,
                  total=total, page=OFFSETS_PER_PAGE, error=error, may_reset=may_reset, reset=reset,
                  modes=group_reset.MODES, preview=preview, reset_done=request.query.get("reset_done"))


async def _may_reset(request: web.Request, group_id: str) -> bool:
    if authorizing(request):
        return may_group(request, Operation.READ, group_id, audit=False)
    return await refusal(request, None) is None


async def reset_group(request: web.Request) -> web.Response:
    """POST /console/group/reset?id=: commit what the preview showed (planned again now), then show the group."""
    cluster = cluster_of(request)
    group_id = request.query.get("id", "")
    if authorizing(request) and not may_group(request, Operation.READ, group_id):
        return forbidden(request, f"you may not reset consumer group {group_id!r} (it needs READ on the group)")
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
    denied = await form_refusal(request, None)
    if denied is not None:
        return await group(request, error=denied, status=403)
    try:
        rows = await group_reset.plan(request, cluster, group_id, form.get("mode", ""), form.get("value", ""),
                                      form.get("topic", ""))
        await group_reset.commit(cluster, group_id, rows)
    except group_reset.ResetError as exc:
        return await group(request, error=str(exc), status=400)
    except storage.StorageError as exc:
        return await group(request, error=str(exc), status=409)
    raise web.HTTPSeeOther("/console/group?" + urlencode({"id": group_id, "reset_done": len(rows)}))


async def tail_page(request: web.Request) -> web.Response:
    cluster = cluster_of(request)
    info, missing = topic_asked(request, Operation.READ)
    if info is None:
        return missing
    start = "beginning" if request.query.get("from") == "beginning" else "end"
    return render(request, "tail.html", title=f"Tail {canonical_name(info.stream, info.name, cluster.default_stream)}",
                  stream=info.stream, topic=info.name, partitions=info.partitions, start=start,
                  name=canonical_name(info.stream, info.name, cluster.default_stream), opened_ms=int(time.time() * 1000))


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
