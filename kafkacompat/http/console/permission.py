"""Who may change streams and topics from the console.

With HTTP authentication (`http_authentication = "basic"`) the request's
principal is asked of the broker's authorizer, as the stream admin API asks
it: creating a stream needs CREATE on the cluster, changing one its admin
permission (or ALTER on the cluster); with authorization off every
authenticated user may. Without HTTP authentication the only safe rule is
the one the HTTP server's default bind already follows: changes are allowed
when the server listens on a loopback address only, so whoever reaches it
is on this machine. An application may set ADMIN_CHECK to decide otherwise.

Forms are further refused when the browser says they came from another
site (Origin / Sec-Fetch-Site), so a page elsewhere cannot post to a
console on 127.0.0.1 (cross-site request forgery), and when the Host header
is not a loopback name (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from ...security.acls import CLUSTER_NAME, Operation, ResourceType
from ...security.authorizer import client_host
from ..common import BROKER
from ..principal import principal_of

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
    """None when the request may create or change `stream` (None: a new stream), else why not."""
    broker = request.app[BROKER]
    if broker.config.http_authentication != "none":
        return _authorized(request, stream)
    host = broker.config.http_host
    if not is_loopback(host):
        return (f"changes are refused: the HTTP server listens on {host}, not on loopback only, "
                "and HTTP users are not authenticated yet")
    reached_as = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    if not is_loopback(reached_as):  # a DNS-rebound name pointing at 127.0.0.1
        return f"changes are refused: the console was reached as {request.host}, not by a loopback name"
    return None


def _authorized(request: web.Request, stream: str | None) -> str | None:
    authorizer = request.app[BROKER].cluster.authorizer
    principal = principal_of(request)
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    host = client_host(f"{peer[0]}:{peer[1]}") if isinstance(peer, tuple) else "*"
    if stream is None or authorizer.store.get_stream(stream) is None:  # a stream to be created
        if authorizer.allowed(principal, host, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return f"{principal} may not create streams (needs CREATE on the cluster)"
    if authorizer.stream_allows(principal, stream, "admin") or authorizer.allowed(
            principal, host, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return f"{principal} may not change stream {stream} (needs its admin permission or ALTER on the cluster)"


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
