"""Who may change streams and topics from the console: the one hook security plugs into.

Until the broker authenticates HTTP users (Basic or mTLS mapped to the Kafka
listeners' principals), the only safe rule is the one the HTTP server's
default bind already follows: changes are allowed when the server listens
on a loopback address only, so whoever reaches it is on this machine.
Security replaces `may_administer` (or sets ADMIN_CHECK on the application)
with "the request's principal holds the stream's admin permission".

Forms are further refused when the browser says they came from another
site (Origin / Sec-Fetch-Site), so a page elsewhere cannot post to a
console on 127.0.0.1 (cross-site request forgery), and when the Host header
is not a loopback name (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..common import BROKER

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
    """None when the request may create or change `stream` (None: any stream), else why not.

    The default rule: the HTTP server binds loopback only. This is the hook
    for the admin permission once HTTP users are authenticated.
    """
    host = request.app[BROKER].config.http_host
    if not is_loopback(host):
        return (f"changes are refused: the HTTP server listens on {host}, not on loopback only, "
                "and HTTP users are not authenticated yet")
    reached_as = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    if not is_loopback(reached_as):  # a DNS-rebound name pointing at 127.0.0.1
        return f"changes are refused: the console was reached as {request.host}, not by a loopback name"
    return None


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
