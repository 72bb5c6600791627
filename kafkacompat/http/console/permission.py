"""Who may see and change what from the console: the broker's authorizer, as on every other entry point.

On a broker with an authorizer every page, form and live tail asks it for
the request's principal (HTTP login, see ..principal) exactly as the Kafka
port would: a topic's page and tail need DESCRIBE and READ on it, a group's
page DESCRIBE on the group, a stream's page one of its permissions (as
`stream info`); listings show only what the principal may describe, and
forms run the admin CLI's own authorized operations (stream_admin.run).
A refusal is an audit line naming the principal, operation, resource and
route.

Without an authorizer, changes follow the rule the HTTP server's default
bind already follows: with HTTP logins anyone logged in may; without them
changes are allowed when the server listens on a loopback address only, so
whoever reaches it is on this machine. An application may set ADMIN_CHECK
to decide otherwise.

Forms are further refused when the browser says they came from another
site (Origin / Sec-Fetch-Site), so a page elsewhere cannot post to a
console on 127.0.0.1 (cross-site request forgery), and when the Host header
is not a loopback name (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from ...operations import streams as stream_admin
from ...security.acls import CLUSTER_NAME, Operation, ResourceType
from ...security.authorizer import client_host, deny
from ..common import BROKER
from ..principal import caller, login_method

AdminCheck = Callable[[web.Request, str | None], Awaitable[str | None]]
ADMIN_CHECK: web.AppKey[AdminCheck] = web.AppKey("console_admin_check")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Is `host` (an address or name, maybe bracketed IPv6) a loopback-only address?"""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def may_administer(request: web.Request, stream: str | None) -> str | None:
    """None when the request may create or change `stream` (None: a new stream), else why not (shown, not audited)."""
    broker = request.app[BROKER]
    if authorizing(request):
        return _authorized(request, stream)
    if login_method(broker.config) != "none":
        return None
    host = broker.config.http_host
    if not is_loopback(host):
        return (f"changes are refused: the HTTP server listens on {host}, not on loopback only, "
                "and HTTP users are not authenticated")
    reached_as = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    if not is_loopback(reached_as):  # a DNS-rebound name pointing at 127.0.0.1
        return f"changes are refused: the console was reached as {request.host}, not by a loopback name"
    return None


def authorizing(request: web.Request) -> bool:
    cluster = request.app[BROKER].cluster
    return cluster is not None and cluster.authorizer.enabled


def _authorized(request: web.Request, stream: str | None) -> str | None:
    authorizer = request.app[BROKER].cluster.authorizer
    who = caller(request)
    principal, host = who.principal, client_host(who.peer)
    if stream is None or authorizer.store.get_stream(stream) is None:  # a stream to be created
        if authorizer.allowed(principal, host, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return f"{principal} may not create streams (needs CREATE on the cluster)"
    if authorizer.stream_allows(principal, stream, "admin") or authorizer.allowed(
            principal, host, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return f"{principal} may not change stream {stream} (needs its admin permission or ALTER on the cluster)"


def may_topic(request: web.Request, operation: Operation, stream: str, topic: str, *, audit: bool = True) -> bool:
    """Whether the request's principal may do `operation` on a topic (an audit line when not, unless a listing)."""
    who = caller(request)
    return who.cluster.authorizer.known_topic(who, operation, stream, topic, log_denied=audit)


def may_group(request: web.Request, operation: Operation, group: str, *, audit: bool = True) -> bool:
    who = caller(request)
    return who.cluster.authorizer.group(who, operation, group, log_denied=audit)


def may_see_stream(request: web.Request, path: str, *, audit: bool = True) -> bool:
    """As `stream info` decides: one of the stream's permissions, or DESCRIBE on the cluster."""
    who = caller(request)
    if not who.cluster.authorizer.enabled or stream_admin.may_see_stream(who, path):
        return True
    if audit:
        deny(who, Operation.DESCRIBE, "STREAM", path)
    return False


def may_see_broker(request: web.Request, *, audit: bool = True) -> bool:
    """The broker-wide figures (charts), as /metrics: DESCRIBE on the cluster when there is an authorizer."""
    if not authorizing(request):
        return True
    who = caller(request)
    return bool(who.cluster.authorizer.cluster(who, Operation.DESCRIBE, log_denied=audit))


async def form_refusal(request: web.Request, stream: str | None) -> str | None:
    """Why a form may not run at all; with an authorizer only where it came from counts (the operation decides)."""
    if authorizing(request):
        return _cross_site(request)
    return await refusal(request, stream)


async def refusal(request: web.Request, stream: str | None) -> str | None:
    """Why this request may not change anything (None: it may): the admin check, then where it came from."""
    check = request.app.get(ADMIN_CHECK, may_administer)
    reason = await check(request, stream)
    if reason is not None or request.method in ("GET", "HEAD"):
        return reason
    return _cross_site(request)


def _cross_site(request: web.Request) -> str | None:
    origin = request.headers.get("Origin")
    expected = f"{request.scheme}://{request.host}"
    if origin is not None and origin != expected:
        return f"refused: the form came from {origin}, not from this console ({expected})"
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return "refused: the form came from another site"
    return None
