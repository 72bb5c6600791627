"""DescribeAcls: the ACLs matching one filter, grouped by resource pattern (kafka-acls.sh --list)."""

from __future__ import annotations

from typing import Any

from ..security.acls import AclFilter, Operation, PatternType, Permission, ResourceType, from_code
from ..security.authorizer import CLUSTER_DENIED
from ..services import Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeAcls v1-3 (v0 is gone since Kafka 4.0)
API = Api(29, (1, 3), reads())

SECURITY_DISABLED = "No Authorizer is configured on the broker"  # Kafka's words (AclApis)


def acl_filter(request: Any) -> AclFilter:
    """The AclBindingFilter of a DescribeAcls request or of one DeleteAcls filter (same field names)."""
    return AclFilter(
        from_code(ResourceType, request.resource_type_filter), request.resource_name_filter,
        from_code(PatternType, request.pattern_type_filter), request.principal_filter, request.host_filter,
        from_code(Operation, request.operation), from_code(Permission, request.permission_type),
    )


def refusal(ctx: Request[Security], operation: Operation) -> tuple[ErrorCode, str] | None:
    """Kafka's order for the ACL APIs: the cluster operation first, then whether an authorizer runs at all."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
    if not authorizer.enabled:
        return ErrorCode.security_disabled, SECURITY_DISABLED
    return None


async def handle(ctx: Request[Security], request: Any) -> Any:
    m = schema_of(ctx)
    refused = refusal(ctx, Operation.DESCRIBE)
    if refused is not None:
        return make(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=refused[0],
                    error_message=refused[1], resources=())
    wanted = acl_filter(request)
    if wanted.unknown_part() is not None:
        return make(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request,
                    error_message=f"Filter contain UNKNOWN elements, filter: {wanted}", resources=())
    by_pattern: dict[tuple[int, str, int], list[Any]] = {}
    for acl in ctx.cluster.authorizer.acls.matching(wanted):
        by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            make(m.AclDescription, principal=acl.principal, host=acl.host, operation=acl.operation,
                 permission_type=acl.permission))
    resources = tuple(
        make(m.DescribeAclsResource, resource_type=rtype, resource_name=name, pattern_type=ptype, acls=tuple(acls))
        for (rtype, name, ptype), acls in by_pattern.items()
    )
    return make(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                resources=resources)
