"""CreateAcls: store ACL bindings durably; they count from the next request on (kafka-acls.sh --add)."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..security.acls import (
    AclBinding,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    from_code,
    validate,
)
from ..services import Controller, Request, Security
from .common import NO_THROTTLE, ErrorCode, at_controller, make, schema_of, storage_error_code
from .describe_acls import refusal
from .registry import Api, changes

# CreateAcls v1-3
API = Api(30, (1, 3), changes(("creations",), "results"))

SECURITY_DISABLED = "No Authorizer is configured."  # Kafka's words for CreateAcls and DeleteAcls


class AclChanges(Security, Controller, Protocol):
    """What of the broker CreateAcls and DeleteAcls reach: the ACLs, and the controller that writes them."""


async def handle(ctx: Request[AclChanges], request: Any) -> Any:
    m = schema_of(ctx)
    refused = refusal(ctx, Operation.ALTER)
    if refused is not None:
        message = SECURITY_DISABLED if refused[0] == ErrorCode.security_disabled else refused[1]
        return make(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
            make(m.AclCreationResult, error_code=refused[0], error_message=message) for _ in request.creations))
    if (forwarded := await at_controller(ctx, request)) is not None:
        return forwarded
    outcomes: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        acl = AclBinding(
            from_code(ResourceType, creation.resource_type), creation.resource_name,
            from_code(PatternType, creation.resource_pattern_type), creation.principal, creation.host,
            from_code(Operation, creation.operation), from_code(Permission, creation.permission_type),
        )
        try:
            validate(acl)
        except InvalidAclError as exc:
            outcomes.append((ErrorCode.invalid_request, str(exc)))
            continue
        valid.append(acl)
        outcomes.append((ErrorCode.none, None))
    if valid:
        try:
            await ctx.cluster.authorizer.acls.add(valid)
        except storage.StorageError as exc:  # not stored (the store logged why): none of them is in force
            outcomes = [(storage_error_code(exc), str(exc)) if code == ErrorCode.none else (code, message)
                        for code, message in outcomes]
    return make(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        make(m.AclCreationResult, error_code=code, error_message=message) for code, message in outcomes))
