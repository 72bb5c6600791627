"""Who an HTTP request acts as: the one place REST authentication will plug in.

Until the HTTP listener authenticates (HTTP Basic or mTLS mapped to the
Kafka listeners' principals), every request is the anonymous user, which is
why the server binds to loopback by default. A middleware records the
principal and peer of the request being served in context variables, so
the Kafka calls made on its behalf (kafka_calls.call) carry them, and so do
tasks it starts (a consumer instance's membership inherits its creator's).
"""

from __future__ import annotations

import contextvars
from typing import Any

from aiohttp import web

ANONYMOUS = "User:ANONYMOUS"
_principal: contextvars.ContextVar[str] = contextvars.ContextVar("rest_principal", default=ANONYMOUS)
_peer: contextvars.ContextVar[str] = contextvars.ContextVar("rest_peer", default="rest-proxy")


def principal_of(request: web.Request) -> str:
    """The Kafka principal ("User:name") this HTTP request acts as."""
    return ANONYMOUS


def current_principal() -> str:
    """The principal of the HTTP request being served (ANONYMOUS outside one)."""
    return _principal.get()


def current_peer() -> str:
    """The HTTP client being served, as Kafka request contexts name a peer ("host:port via REST")."""
    return _peer.get()


@web.middleware
async def identify(request: web.Request, handler: Any) -> web.StreamResponse:
    _principal.set(principal_of(request))
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    _peer.set(f"{peer[0]}:{peer[1]} via REST" if isinstance(peer, tuple) else "rest-proxy")
    return await handler(request)


def add_routes(app: web.Application) -> None:
    app.middlewares.append(identify)
