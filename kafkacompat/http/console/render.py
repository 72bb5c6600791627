"""Rendering console pages: one Jinja2 environment per application, autoescaping every value."""

from __future__ import annotations

from typing import Any

import jinja2
from aiohttp import web

from ...units import format_duration
from ..common import BROKER
from .permission import may_see_broker

TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("console_templates")
# Only this console's own files: no inline script, no other origin, no framing (forms cannot be clickjacked).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def setup_templates(app: web.Application) -> None:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kafkacompat.http.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = human_size
    env.filters["duration"] = format_duration  # 604800 -> 7d, as the CLI writes a ttl
    env.filters["config"] = config_value
    # the file's URL with ?v=<hash of its content>, so a browser never keeps a stale copy after an upgrade
    env.globals["static"] = lambda name: str(app.router["console_static"].url_for(filename=name))
    app[TEMPLATES] = env


def human_size(value: int | None) -> str:
    """Bytes as people read them: 1.5 MiB."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def config_value(name: str, value: str) -> str:
    """A topic config as set, with durations in ms also in human units: 604800000 (7d)."""
    if name.endswith(".ms") and value.isdigit() and int(value) >= 1000 and int(value) % 1000 == 0:
        return f"{value} ({format_duration(int(value) // 1000)})"
    return value


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    broker = request.app[BROKER]
    cluster = broker.cluster
    context.setdefault("title", "")
    context.setdefault("cluster_pages", cluster is not None and may_see_broker(request, audit=False))  # ACLs, users
    body = request.app[TEMPLATES].get_template(template).render(
        request=request, cluster_id=cluster.cluster_id if cluster else "", node_id=broker.config.node_id, **context)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                        headers=SECURITY_HEADERS)
