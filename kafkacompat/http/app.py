"""The aiohttp application: one route module per area, JSON errors everywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from . import console, health, metrics, openapi, principal, rest_errors, rest_produce, rest_v2, rest_v3, schema_registry
from .common import BROKER
from .console import schemas as console_schemas

if TYPE_CHECKING:
    from .common import ServedBroker


@web.middleware
async def json_errors(request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
    """aiohttp's HTTP errors (404, 405, ...) as JSON, so clients of an API never get an HTML page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response({"error_code": exc.status, "message": exc.reason}, status=exc.status,
                                 headers={k: v for k, v in exc.headers.items() if k == "Allow"})


def build_app(broker: "ServedBroker") -> web.Application:
    app = web.Application(middlewares=[json_errors])
    app[BROKER] = broker
    health.add_routes(app)
    metrics.add_routes(app)
    console.add_routes(app)  # the web console at / (and /console/...)
    principal.add_routes(app)
    rest_errors.add_routes(app)
    rest_v3.add_routes(app)
    rest_produce.add_routes(app)
    rest_v2.add_routes(app)
    openapi.add_routes(app)
    schema_registry.add_routes(app)  # Confluent's Schema Registry API at the root
    console_schemas.add_routes(app)  # the console's schema page, a module of its own
    return app
