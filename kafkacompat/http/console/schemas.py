"""The console's schema page: subjects, their versions, and what changed between two versions.

A page of its own beside the console's others (registered by app.py), reading
the broker's registry (kafkacompat.schemas) as the registry's REST routes do
and showing only the subjects the principal may read (http/schema_registry.may).
"""

from __future__ import annotations

import difflib
import json

from aiohttp import web
from google.protobuf import text_format

from ...schemas import formats
from ...schemas.registry import RegistryError, Version, registry_of
from ..schema_registry import READ, may
from .pages import cluster_of, forbidden, not_found
from .render import render


def readable(version: Version) -> str:
    """A schema as people read it: indented JSON, or a Protobuf file's descriptor in text form."""
    if version.schema_type == formats.PROTOBUF:
        return text_format.MessageToString(formats.parse_proto(version.schema))
    return json.dumps(json.loads(version.schema), indent=2)


def difference(older: Version, newer: Version) -> str:
    return "".join(difflib.unified_diff(readable(older).splitlines(keepends=True),
                                        readable(newer).splitlines(keepends=True),
                                        f"version {older.version}", f"version {newer.version}"))


async def page(request: web.Request) -> web.Response:
    registry = registry_of(cluster_of(request))
    await registry.refresh()
    subject = request.query.get("subject")
    if subject is None:
        rows = [registry.version(s, "latest") for s in registry.subjects() if may(request, READ, s, audit=False)]
        return render(request, "schemas.html", title="Schemas", rows=rows, subject=None)
    if not may(request, READ, subject):
        return forbidden(request, f"You may not read the schemas of subject {subject}.")
    try:
        versions = registry.versions(subject)
        pair = [registry.version(subject, request.query.get(end, default))
                for end, default in (("from", versions[max(len(versions) - 2, 0)].version), ("to", "latest"))]
    except RegistryError as exc:
        return not_found(request, exc.message)
    return render(request, "schemas.html", title=subject, subject=subject, versions=versions, shown=pair[1],
                  schema=readable(pair[1]), older=pair[0], diff=difference(*pair))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/console/schemas", page)
