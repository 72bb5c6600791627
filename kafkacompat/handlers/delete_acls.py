"""DeleteAcls: remove every ACL matching each filter and answer what each removed (kafka-acls.sh --remove)."""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from ..security.acls import Operation
from ..services import Request
from .common import NO_THROTTLE, ErrorCode, at_controller, make, schema_of, storage_error_code
from .create_acls import SECURITY_DISABLED, AclChanges
from .describe_acls import acl_filter, refusal
from .registry import Api, changes

# DeleteAcls v1-3
API = Api(31, (1, 3), changes(("filters",), "filter_results"))


async def handle(ctx: Request[AclChanges], request: Any) -> Any:
    m = schema_of(ctx)
    refused = refusal(ctx, Operation.ALTER)
    if refused is not None:
        message = SECURITY_DISABLED if refused[0] == ErrorCode.security_disabled else refused[1]
        return make(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
            make(m.DeleteAclsFilterResult, error_code=refused[0], error_message=message, matching_acls=())
            for _ in request.filters))
    if (forwarded := await at_controller(ctx, request)) is not None:
        return forwarded
    table = ctx.cluster.authorizer.acls
    results = []
    doomed: dict[str, Any] = {}
    for wanted in map(acl_filter, request.filters):
        unknown = wanted.unknown_part()
        if unknown is not None:
            results.append(make(m.DeleteAclsFilterResult, error_code=ErrorCode.invalid_request,
                                error_message=f"Unknown {unknown}.", matching_acls=()))
            continue
        matched = table.matching(wanted)
        doomed.update((acl.key, acl) for acl in matched)
        results.append(make(m.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None, matching_acls=tuple(
            make(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                 resource_type=acl.resource_type, resource_name=acl.resource_name, pattern_type=acl.pattern_type,
                 principal=acl.principal, host=acl.host, operation=acl.operation, permission_type=acl.permission)
            for acl in matched)))
    if doomed:
        try:
            await table.remove(list(doomed.values()))
        except storage.StorageError as exc:  # not stored (the store logged why): every one is still in force
            results = [r if r.error_code != ErrorCode.none else make(
                m.DeleteAclsFilterResult, error_code=storage_error_code(exc), error_message=str(exc), matching_acls=())
                for r in results]
    return make(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results))
