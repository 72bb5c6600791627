"""Who an HTTP request acts as: the one place REST authentication will plug in.

Until the HTTP listener authenticates (HTTP Basic or mTLS mapped to the
Kafka listeners' principals), every request is the anonymous user, which is
why the server binds to loopback by default.
"""

from __future__ import annotations

from aiohttp import web

ANONYMOUS = "User:ANONYMOUS"


def principal_of(request: web.Request) -> str:
    """The Kafka principal ("User:name") this HTTP request acts as."""
    return ANONYMOUS
