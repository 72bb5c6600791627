"""The web console at `/`: streams, topics, partitionlets, consumer groups and a live tail.

Server-rendered pages (Jinja2, autoescaped: topic and group names are user
input) with one hand-written stylesheet and one script shipped in this
package; nothing is fetched from elsewhere, so it works offline. Pages read
the broker's own Cluster; forms change it through the same operations the
admin CLI uses (kafkacompat/operations/streams.py), behind permission.refusal.

Its paths live under /console/ (the home page is `/`), apart from the REST
proxy's /v3, /topics, /consumers and /streams.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from . import acls, actions, charts, forms, history, messages, pages, tail, users
from .render import TEMPLATES, setup_templates

STATIC = Path(__file__).parent / "static"


def add_routes(app: web.Application) -> None:
    setup_templates(app)
    app.router.add_get("/", pages.home, name="console_home")
    app.router.add_get("/console/stream", pages.stream)
    app.router.add_get("/console/topic", pages.topic)
    app.router.add_get("/console/groups", pages.groups)
    app.router.add_get("/console/group", pages.group)
    app.router.add_get("/console/tail", pages.tail_page)
    app.router.add_get("/console/tail/events", tail.events)
    app.router.add_post("/console/stream/create", forms.create_stream)
    app.router.add_post("/console/stream/edit", forms.edit_stream)
    app.router.add_post("/console/topic/create", forms.create_topic)
    app.router.add_post("/console/stream/replica", forms.replica_state)
    app.router.add_post("/console/topic/edit", forms.edit_topic)
    app.router.add_post("/console/group/reset", pages.reset_group)
    app.router.add_get("/console/acls", acls.page)
    app.router.add_post("/console/acls/add", acls.change)
    app.router.add_post("/console/acls/remove", acls.change)
    app.router.add_get("/console/users", users.page)
    app.router.add_post("/console/users/add", users.change)
    app.router.add_post("/console/users/remove", users.change)
    app.router.add_post("/console/topic/delete", actions.delete_topic)
    app.router.add_post("/console/topic/delete-records", actions.delete_records)
    app.router.add_get("/console/messages", messages.browse)
    app.router.add_post("/console/messages/produce", messages.produce)
    app.router.add_get("/console/charts/data", charts.data)
    app.router.add_get("/console/vendor/uplot/{name}", charts.library)
    app.router.add_static("/console/static", STATIC, name="console_static", append_version=True)
    tail.track_tails(app)
    history.track(app)
    folder = app[charts.UPLOT] = charts.uplot_dir()
    app[TEMPLATES].globals["uplot"] = charts.uplot_version(folder) if folder is not None else None
    app[TEMPLATES].globals["partition_series"] = history.PARTITION_SERIES_MAX
