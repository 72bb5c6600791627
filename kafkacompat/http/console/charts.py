"""The console's charts: a small JSON endpoint of the kept history, and the chart library served from where it is installed.

The library is uPlot (about 50 KB, no dependencies, drawn on a canvas, fast
with thousands of points), installed at set-up by npm into
charts/node_modules (pinned by charts/package-lock.json; tests/run.sh and
docs/console.md say how), or from KAFKACOMPAT_UPLOT_DIR: no third-party
code is kept in this repository and nothing is fetched from a CDN, so the
console works offline. Without it the pages say so where the charts would be.

The data endpoint asks the same permission as the page it feeds: DESCRIBE
on the cluster for the broker's figures (as /metrics), on the topic, on the
group; a stream's (the sums of its topics) one of the stream's permissions,
as its page and `stream info`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from aiohttp import web

from ...security.acls import Operation
from ..principal import caller
from .history import BROKER_SCOPE, HISTORY, Scope
from .pages import cluster_of
from .permission import authorizing, may_group, may_see_broker, may_see_stream, may_topic

CHARTS_DIR = Path(__file__).parent / "charts"
LIBRARY_FILES = ("uPlot.iife.min.js", "uPlot.min.css")
UPLOT: web.AppKey["Path | None"] = web.AppKey("console_uplot_dir")


def uplot_dir() -> Path | None:
    """Where uPlot's dist files are, or None when it is not installed."""
    configured = os.environ.get("KAFKACOMPAT_UPLOT_DIR")
    folder = Path(configured) if configured else CHARTS_DIR / "node_modules" / "uplot" / "dist"
    return folder if all((folder / name).is_file() for name in LIBRARY_FILES) else None


def uplot_version(folder: Path) -> str:
    try:
        return str(json.loads((folder.parent / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


async def library(request: web.Request) -> web.StreamResponse:
    """GET /console/vendor/uplot/<file>: uPlot's script or stylesheet from its installed folder."""
    folder = request.app[UPLOT]
    name = request.match_info["name"]
    if folder is None or name not in LIBRARY_FILES:
        raise web.HTTPNotFound(reason="uPlot is not installed (see docs/console.md)" if folder is None
                               else f"no file {name!r}")
    return web.FileResponse(folder / name, headers={"Cache-Control": "max-age=86400"})


async def data(request: web.Request) -> web.Response:
    """GET /console/charts/data?scope=broker|stream|topic|group&...: the history as JSON, oldest sample first."""
    cluster_of(request)  # 503 while the store is not open
    history = request.app[HISTORY]
    query = request.query
    scope = query.get("scope", "")
    if scope == "broker":
        if not may_see_broker(request):
            return _refused(f"{caller(request).principal} may not see the broker's figures "
                            "(needs DESCRIBE on the cluster)")
        wanted: Scope = BROKER_SCOPE
    elif scope == "stream":
        path = query.get("path", "")
        if authorizing(request) and not may_see_stream(request, path):
            return _refused(f"you may not see stream {path!r}")
        wanted = ("stream", path)
    elif scope == "topic":
        stream, name = query.get("stream", ""), query.get("topic", "")
        if authorizing(request) and not may_topic(request, Operation.DESCRIBE, stream, name):
            return _refused(f"you may not DESCRIBE topic {name!r} of stream {stream!r}")
        wanted = ("topic", stream, name)
    elif scope == "group":
        group = query.get("id", "")
        if authorizing(request) and not may_group(request, Operation.DESCRIBE, group):
            return _refused(f"you may not DESCRIBE consumer group {group!r}")
        wanted = ("group", group)
    else:
        return web.json_response({"error_code": 400, "message": f"scope {scope!r} is not one of "
                                  "broker, stream, topic, group"}, status=400)
    return web.json_response(history.view(wanted), headers={"Cache-Control": "no-store"})


def _refused(message: str) -> web.Response:
    return web.json_response({"error_code": 40301, "message": message}, status=403)
