"""The console's forms (POST): create a stream, edit its policy, create a topic, pause or resume a replica link.

Each runs the admin CLI's own operation (operations/streams.run) as the
request's principal, so the console checks input and authorization exactly
as `kafkacompat stream create` does and a refused change leaves the store
as it was. A refused form is shown again
with the reason and what was typed; a done one redirects (303) to the page
of what it made.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from kafkacompat import storage

from ...broker.cluster import TopicError
from ...operations import streams as stream_admin
from ...replication.admin_ops import ReplicaOpError
from ...units import parse_duration
from ..principal import caller
from . import pages
from .permission import form_refusal

log = logging.getLogger(__name__)
INT_FIELDS = ("ttl_seconds", "default_partitions", "partitionlet_bytes")
CHOICE_FIELDS = ("fsync", "cleanup_policy")
MAX_FORM_BYTES = 64 * 1024


class FormError(ValueError):
    """A form field that does not parse; shown beside the form."""


def _whole_numbers(form: dict[str, str], names: Iterable[str], into: dict[str, Any]) -> None:
    """The fields `names` of a form as whole numbers into `into`; a blank field is left out."""
    for name in names:
        text = form.get(name, "").strip()
        if text:
            try:
                into[name] = int(text)
            except ValueError:
                raise FormError(f"{name.replace('_', ' ')} must be a whole number, not {text!r}") from None


def _policy(form: dict[str, str]) -> dict[str, Any]:
    """Stream policy changes from a form: blank fields keep their value; the checkbox always counts."""
    policy: dict[str, Any] = {}
    _whole_numbers(form, [name for name in INT_FIELDS if name != "ttl_seconds"], policy)
    ttl = form.get("ttl_seconds", "").strip()
    if ttl:  # as the CLI's --ttl: 7d, 12h, 3600
        try:
            policy["ttl_seconds"] = 0 if ttl == "forever" else parse_duration(ttl)
        except ValueError as exc:
            raise FormError(f"time to live: {exc}") from None
    for name in CHOICE_FIELDS:
        if form.get(name):
            policy[name] = form[name]
    policy["autocreate"] = form.get("autocreate") == "on"
    return policy


async def _form(request: web.Request) -> dict[str, str]:
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    data = await request.post()
    return {key: value for key, value in data.items() if isinstance(value, str)}


async def _run(request: web.Request, stream: str | None, op: Callable[[], Awaitable[Any]],
               again: Callable[[str, int], Awaitable[web.Response]], done: str) -> web.Response:
    """Check permission, run `op`, then redirect to `done`, or show the form `again` with the reason."""
    denied = await form_refusal(request, stream)
    if denied is not None:
        return await again(denied, 403)
    try:
        await op()
    except FormError as exc:
        return await again(str(exc), 400)
    except stream_admin.AdminError as exc:
        return await again(str(exc), 403 if exc.code.name.endswith("authorization_failed") else 400)
    except (TopicError, storage.StorageError) as exc:
        return await again(str(exc), 409 if isinstance(exc, (storage.StreamExistsError, storage.TopicExistsError)) else 400)
    log.debug("console %s from %s", request.path, request.remote)  # the change itself: admin_log
    raise web.HTTPSeeOther(done)


async def create_stream(request: web.Request) -> web.Response:
    form = await _form(request)
    path = form.get("path", "").strip()

    async def op() -> None:
        await stream_admin.run(caller(request), {"op": "stream.create", "path": path, "policy": _policy(form)})

    async def again(error: str, status: int) -> web.Response:
        return await pages.home(request, error=error, form=form, status=status)

    return await _run(request, path or None, op, again, "/console/stream?" + urlencode({"path": path}))


async def edit_stream(request: web.Request) -> web.Response:
    form = await _form(request)
    path = request.query.get("path", "")

    async def op() -> None:
        await stream_admin.run(caller(request), {"op": "stream.edit", "path": path, "policy": _policy(form)})

    async def again(error: str, status: int) -> web.Response:
        return await pages.stream(request, error=error, form=form, status=status)

    return await _run(request, path, op, again, "/console/stream?" + urlencode({"path": path}))


async def create_topic(request: web.Request) -> web.Response:
    form = await _form(request)
    path = request.query.get("path", "")
    name = form.get("topic", "").strip()

    async def op() -> None:
        args: dict[str, Any] = {"name": f"{path}:{name}" if name else ""}
        _whole_numbers(form, ("partitions",), args)
        if not name:
            raise FormError("give the topic a name")
        await stream_admin.run(caller(request), {"op": "topic.create", **args})

    async def again(error: str, status: int) -> web.Response:
        return await pages.stream(request, error=error, form=form, status=status)

    return await _run(request, path, op, again, "/console/topic?" + urlencode({"stream": path, "topic": name}))



async def edit_topic(request: web.Request) -> web.Response:
    """Add partitions and set (or, with an empty value, remove) one config, as `topic edit` does."""
    form = await _form(request)
    path, name = request.query.get("stream", ""), request.query.get("topic", "")

    async def op() -> None:
        args: dict[str, Any] = {"name": f"{path}:{name}"}
        _whole_numbers(form, ("partitions",), args)
        config = form.get("config", "").strip()
        if config:
            args["configs"] = {config: form.get("value", "").strip() or None}
        await stream_admin.run(caller(request), {"op": "topic.edit", **args})

    async def again(error: str, status: int) -> web.Response:
        return await pages.topic(request, error=error, form=form, status=status)

    return await _run(request, path, op, again, "/console/topic?" + urlencode({"stream": path, "topic": name}))


async def replica_state(request: web.Request) -> web.Response:
    """Pause or resume one of a stream's replica links, as `kafkacompat stream replica pause|resume`."""
    form = await _form(request)
    path = request.query.get("path", "")
    action = form.get("action", "")

    async def op() -> None:
        if action not in ("pause", "resume"):
            raise FormError(f"action {action!r} is not pause or resume")
        try:
            await stream_admin.run(caller(request), {"op": f"replica.{action}", "path": path,
                                                     "replica": form.get("replica", "")})
        except ReplicaOpError as exc:  # no such link, replication off: the CLI's message
            raise FormError(str(exc)) from None

    async def again(error: str, status: int) -> web.Response:
        return await pages.stream(request, error=error, status=status)

    return await _run(request, path, op, again, "/console/stream?" + urlencode({"path": path}))
