"""/health/live and /health/ready, for orchestrators' liveness and readiness probes."""

from __future__ import annotations

from aiohttp import web

from .common import BROKER


async def live(request: web.Request) -> web.Response:
    """The process answers: nothing more is claimed."""
    return web.json_response({"status": "up"})


async def ready(request: web.Request) -> web.Response:
    """200 once the store is open and the Kafka listener accepts, 503 (with the reason) otherwise."""
    checks = request.app[BROKER].readiness()
    ok = all(checks.values())
    return web.json_response({"status": "ready" if ok else "not ready", "checks": checks},
                             status=200 if ok else 503)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health/live", live)
    app.router.add_get("/health/ready", ready)
