"""The console's ACL page: list, add and remove ACLs, each a Kafka request (DescribeAcls, CreateAcls, DeleteAcls).

Through the broker's own handlers as the request's principal, so listing
needs DESCRIBE on the cluster and changes ALTER on it, exactly as for
kafka-acls.sh, and a broker without an authorizer says so in Kafka's words.
The add form is offered only to who may ALTER the cluster; removing an ACL
deletes exactly that binding (a filter matching its every field).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from kio.schema.errors import ErrorCode

from ...security.acls import Operation, PatternType, Permission, ResourceType
from ..kafka_calls import build, call
from ..principal import caller
from .pages import cluster_of
from .permission import authorizing, form_refusal
from .render import render

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
RESOURCE_TYPES = [t.name for t in ResourceType if t.value >= ResourceType.TOPIC]
PATTERNS = ["LITERAL", "PREFIXED"]
OPERATIONS = [o.name for o in Operation if o.value >= Operation.ALL]
PERMISSIONS = ["ALLOW", "DENY"]
FIELDS = ("resource_type", "resource_name", "pattern", "principal", "host", "operation", "permission")
MAX_FORM_BYTES = 64 * 1024


class AclFormError(ValueError):
    """A form field that names no resource type, operation, ...: shown beside the form."""


def _binding(form: dict[str, str]) -> dict[str, Any]:
    """The ACL binding a form describes, as the Kafka request's fields."""
    def choice(name: str, choices: list[str], enum: Any) -> int:
        value = form.get(name, "")
        if value not in choices:
            raise AclFormError(f"{name.replace('_', ' ')} {value!r} is not one of {', '.join(choices)}")
        return int(enum[value])

    principal = form.get("principal", "").strip()
    if ":" not in principal:
        raise AclFormError(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice)")
    name = form.get("resource_name", "").strip()
    if not name:
        raise AclFormError("give the resource's name (kafka-cluster for the cluster, * for every one)")
    return {"resource_type": choice("resource_type", RESOURCE_TYPES, ResourceType), "resource_name": name,
            "pattern": choice("pattern", PATTERNS, PatternType), "principal": principal,
            "host": form.get("host", "").strip() or "*", "operation": choice("operation", OPERATIONS, Operation),
            "permission": choice("permission", PERMISSIONS, Permission)}


async def _listing(request: web.Request) -> tuple[list[dict[str, Any]], str | None]:
    """Every ACL the principal may see, or why none can be listed."""
    answer = await call(cluster_of(request), DESCRIBE_ACLS, build(
        DESCRIBE_ACLS, resource_type_filter=int(ResourceType.ANY), resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY), principal_filter=None, host_filter=None,
        operation=int(Operation.ANY), permission_type=int(Permission.ANY)))
    if answer.error_code:
        return [], answer.error_message or ErrorCode(answer.error_code).name
    rows = []
    for resource in answer.resources:
        for acl in resource.acls:
            rows.append({"resource_type": ResourceType(resource.resource_type).name,
                         "resource_name": resource.resource_name,
                         "pattern": PatternType(resource.pattern_type).name, "principal": acl.principal,
                         "host": acl.host, "operation": Operation(acl.operation).name,
                         "permission": Permission(acl.permission_type).name})
    return sorted(rows, key=lambda r: tuple(r.values())), None


def _may_alter(request: web.Request) -> bool:
    if not authorizing(request):
        return False
    who = caller(request)
    return bool(who.cluster.authorizer.cluster(who, Operation.ALTER, log_denied=False))


async def page(request: web.Request, error: str | None = None, form: dict[str, str] | None = None,
               status: int = 200) -> web.Response:
    """GET /console/acls: every ACL, the add form, a remove button per ACL."""
    rows, refused = await _listing(request)
    if refused is not None and status == 200:
        status = 403 if "authoriz" in refused.lower() else 200
    return render(request, "acls.html", status=status, title="ACLs", acls=rows, refused=refused,
                  may_alter=_may_alter(request) and await form_refusal(request, None) is None, error=error,
                  form=form or {"host": "*", "pattern": "LITERAL", "permission": "ALLOW"},
                  resource_types=RESOURCE_TYPES, patterns=PATTERNS, operations=OPERATIONS, permissions=PERMISSIONS,
                  done=request.query.get("done"))


async def _form(request: web.Request) -> dict[str, str]:
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    return {k: v for k, v in (await request.post()).items() if isinstance(v, str)}


async def change(request: web.Request) -> web.Response:
    """POST /console/acls/add or /console/acls/remove: one CreateAcls or DeleteAcls as the principal."""
    form = await _form(request)
    adding = request.path.endswith("/add")
    denied = await form_refusal(request, None)
    if denied is not None:
        return await page(request, error=denied, form=form, status=403)
    try:
        acl = _binding(form)
    except AclFormError as exc:
        return await page(request, error=str(exc), form=form, status=400)
    cluster = cluster_of(request)
    if adding:
        answer = await call(cluster, CREATE_ACLS, build(CREATE_ACLS, creations=(build(
            CREATE_ACLS, "AclCreation", resource_type=acl["resource_type"], resource_name=acl["resource_name"],
            resource_pattern_type=acl["pattern"], principal=acl["principal"], host=acl["host"],
            operation=acl["operation"], permission_type=acl["permission"]),)))
        (result,) = answer.results
        code, message = result.error_code, result.error_message
    else:
        answer = await call(cluster, DELETE_ACLS, build(DELETE_ACLS, filters=(build(
            DELETE_ACLS, "DeleteAclsFilter", resource_type_filter=acl["resource_type"],
            resource_name_filter=acl["resource_name"], pattern_type_filter=acl["pattern"],
            principal_filter=acl["principal"], host_filter=acl["host"], operation=acl["operation"],
            permission_type=acl["permission"]),)))
        (result,) = answer.filter_results
        code, message = result.error_code, result.error_message
    if code:
        status = 403 if ErrorCode(code) == ErrorCode.cluster_authorization_failed else 400
        return await page(request, error=message or ErrorCode(code).name, form=form, status=status)
    raise web.HTTPSeeOther("/console/acls?" + urlencode({"done": "added" if adding else "removed"}))
