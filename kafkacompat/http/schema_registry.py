"""Confluent's Schema Registry REST API at the HTTP port's root, for stock serializers and registry clients.

Paths, bodies, answers and error codes follow Confluent's API
(`SchemaRegistryClient({"url": "http://HOST:HTTP_PORT"})` works unchanged);
the registry itself (kafkacompat.schemas) keeps schemas in the stream of
the subject's topic. Every route asks the broker's one authorizer: a subject
`T-key`/`T-value` is authorized as topic T (read: DESCRIBE, register: WRITE,
delete and per-subject config or mode: ALTER), any other subject and the
global config and mode as the cluster (DESCRIBE, ALTER). Refusals answer 403
with Confluent's 40301 and write the audit line.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ..schemas import formats
from ..schemas.registry import GLOBAL, Registry, RegistryError, Version, registry_of
from ..security.acls import Operation
from .common import BROKER
from .principal import caller

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
READ, REGISTER, CHANGE = Operation.DESCRIBE, Operation.WRITE, Operation.ALTER
SUBJECT = "/subjects/{subject}"
VERSION = SUBJECT + "/versions/{version}"


def answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def error(status: int, code: int, message: str) -> web.Response:
    return answer({"error_code": code, "message": message}, status)


@web.middleware
async def registry_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """RegistryError as Confluent's JSON on the registry's routes."""
    try:
        return await handler(request)
    except RegistryError as exc:
        return error(exc.status, exc.code, exc.message)


async def registry(request: web.Request) -> Registry:
    """This broker's registry, read up to the end of every stream's `_schemas`."""
    cluster = request.app[BROKER].cluster
    if cluster is None:
        raise RegistryError(503, 50003, "the broker is starting")
    found = registry_of(cluster)
    await found.refresh()
    return found


def topic_of(subject: str) -> str | None:
    """The topic a TopicNameStrategy subject names (`T-key`, `T-value`), else None."""
    topic, dash, suffix = subject.rpartition("-")
    return topic if dash and topic and suffix in ("key", "value") else None


def may(request: web.Request, operation: Operation, subject: str, *, audit: bool = True) -> bool:
    who = caller(request)
    authorizer = who.cluster.authorizer
    if not authorizer.enabled:
        return True
    topic = topic_of(subject)
    if topic is None:
        return authorizer.cluster(who, READ if operation == READ else CHANGE, log_denied=audit)
    return authorizer.topic(who, operation, topic, log_denied=audit)


def allow(request: web.Request, operation: Operation, subject: str) -> None:
    if not may(request, operation, subject):
        raise RegistryError(403, 40301, "User cannot access the resource.")


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def body_of(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"{}")
    except ValueError as exc:
        raise RegistryError(400, 400, f"Unexpected character in the request body: {exc}") from None


def subject_of(request: web.Request) -> str:
    return request.match_info["subject"]


# --- schemas by id ---------------------------------------------------------------------------------------------


async def schema_types(request: web.Request) -> web.Response:
    return answer(list(formats.TYPES))


def schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise RegistryError(404, 40403, f"Schema {request.match_info['id']} not found") from None


async def holders(request: web.Request) -> list[Version]:
    """The versions (of subjects the principal may read) holding the path's id: 40403 / 40301 otherwise."""
    reg = await registry(request)
    wanted = schema_id(request)
    found = reg.holding(wanted)
    if not found:
        raise RegistryError(404, 40403, f"Schema {wanted} not found")
    visible = [v for v in found if may(request, READ, v.subject, audit=False)]
    if not visible:
        allow(request, READ, found[0].subject)  # the refusal, with its audit line
    return visible


def schema_text(request: web.Request, found: Version) -> str:
    """The schema as stored, or for `?format=serialized` a Protobuf one as a base64 FileDescriptorProto."""
    if found.schema_type == formats.PROTOBUF and request.query.get("format") == "serialized":
        return formats.serialized(found.schema)
    return found.schema


async def by_id(request: web.Request) -> web.Response:
    found = (await holders(request))[0]
    body: dict[str, Any] = {"schema": schema_text(request, found)}
    if found.schema_type != formats.AVRO:
        body["schemaType"] = found.schema_type
    if found.references:
        body["references"] = list(found.references)
    return answer(body)


async def raw_by_id(request: web.Request) -> web.Response:
    return web.Response(text=schema_text(request, (await holders(request))[0]), content_type=CONTENT_TYPE)


async def subjects_of_id(request: web.Request) -> web.Response:
    return answer(sorted({v.subject for v in await holders(request) if flag(request, "deleted") or not v.deleted}))


async def versions_of_id(request: web.Request) -> web.Response:
    return answer([{"subject": v.subject, "version": v.version} for v in await holders(request)
                   if flag(request, "deleted") or not v.deleted])


# --- subjects and versions -------------------------------------------------------------------------------------


async def list_subjects(request: web.Request) -> web.Response:
    reg = await registry(request)
    prefix = request.query.get("subjectPrefix", "")
    return answer([s for s in reg.subjects(deleted=flag(request, "deleted"))
                   if s.startswith(prefix) and may(request, READ, s, audit=False)])


async def list_versions(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    return answer([v.version for v in reg.versions(subject, deleted=flag(request, "deleted"))])


async def register(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, REGISTER, subject)
    reg = await registry(request)
    version = await reg.register(subject, await body_of(request))
    return answer({"id": version.id, **version.answer()})


async def lookup(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    body = await body_of(request)
    deleted = flag(request, "deleted")
    reg.versions(subject, deleted=deleted)  # 40401
    found = reg.find(subject, *reg.candidate(body), deleted=deleted)
    if found is None:
        raise RegistryError(404, 40403, "Schema not found")
    return answer(found.answer())


async def get_version(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    found = reg.version(subject, request.match_info["version"], deleted=flag(request, "deleted"))
    return answer({**found.answer(), "schema": schema_text(request, found)})


async def raw_version(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    found = reg.version(subject, request.match_info["version"], deleted=flag(request, "deleted"))
    return web.Response(text=schema_text(request, found), content_type=CONTENT_TYPE)


async def referenced_by(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    found = reg.version(subject, request.match_info["version"], deleted=True)
    return answer(reg.referenced_by(subject, found.version))


async def delete_subject(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, CHANGE, subject)
    reg = await registry(request)
    return answer(await reg.delete_subject(subject, flag(request, "permanent")))


async def delete_version(request: web.Request) -> web.Response:
    subject = subject_of(request)
    allow(request, CHANGE, subject)
    reg = await registry(request)
    return answer(await reg.delete_version(subject, request.match_info["version"], flag(request, "permanent")))


# --- compatibility ---------------------------------------------------------------------------------------------


async def check(request: web.Request) -> web.Response:
    """POST /compatibility/subjects/{subject}/versions[/{version}]: would this schema be accepted?"""
    subject = subject_of(request)
    allow(request, READ, subject)
    reg = await registry(request)
    candidate = reg.candidate(await body_of(request))
    level = reg.compatibility(subject)
    wanted = request.match_info.get("version")
    if wanted is None:
        against = reg.live(subject)
    else:
        against = [reg.version(subject, wanted)]
        level = level.removesuffix("_TRANSITIVE")
    problems = reg.problems(level, *candidate, against)
    body: dict[str, Any] = {"is_compatible": not problems}
    if flag(request, "verbose"):
        body["messages"] = problems
    return answer(body)


# --- config and mode -------------------------------------------------------------------------------------------


def _scope(request: web.Request) -> str:
    subject = request.match_info.get("subject", GLOBAL)
    operation = READ if request.method == "GET" else CHANGE
    if subject == GLOBAL:
        if operation != READ:
            allow(request, CHANGE, GLOBAL)
    else:
        allow(request, operation, subject)
    return subject


async def get_config(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    level = reg.config(subject)
    if level is None and subject != GLOBAL and not flag(request, "defaultToGlobal"):
        raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
    return answer({"compatibilityLevel": level or reg.compatibility(subject)})


async def put_config(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    return answer({"compatibility": await reg.set_config(subject, await body_of(request))})


async def delete_config(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    return answer({"compatibilityLevel": await reg.delete_config(subject)})


async def get_mode(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    mode = reg.mode(subject)
    if mode is None and subject != GLOBAL and not flag(request, "defaultToGlobal"):
        raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
    return answer({"mode": mode or reg.effective_mode(subject)})


async def put_mode(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    return answer({"mode": await reg.set_mode(subject, await body_of(request), flag(request, "force"))})


async def delete_mode(request: web.Request) -> web.Response:
    subject = _scope(request)
    reg = await registry(request)
    return answer({"mode": await reg.delete_mode(subject)})


def add_routes(app: web.Application) -> None:
    app.middlewares.append(registry_errors)  # inside rest_errors, which would make them 500s
    router = app.router
    router.add_get("/schemas/types", schema_types)
    router.add_get("/schemas/ids/{id}", by_id)
    router.add_get("/schemas/ids/{id}/schema", raw_by_id)
    router.add_get("/schemas/ids/{id}/subjects", subjects_of_id)
    router.add_get("/schemas/ids/{id}/versions", versions_of_id)
    router.add_get("/subjects", list_subjects)
    router.add_post(SUBJECT, lookup)
    router.add_delete(SUBJECT, delete_subject)
    router.add_get(SUBJECT + "/versions", list_versions)
    router.add_post(SUBJECT + "/versions", register)
    router.add_get(VERSION, get_version)
    router.add_delete(VERSION, delete_version)
    router.add_get(VERSION + "/schema", raw_version)
    router.add_get(VERSION + "/referencedby", referenced_by)
    router.add_post("/compatibility" + SUBJECT + "/versions", check)
    router.add_post("/compatibility" + VERSION, check)
    for path in ("/config", "/config/{subject}"):
        router.add_get(path, get_config)
        router.add_put(path, put_config)
        router.add_delete(path, delete_config)
    for path in ("/mode", "/mode/{subject}"):
        router.add_get(path, get_mode)
        router.add_put(path, put_mode)
    router.add_delete("/mode/{subject}", delete_mode)

