"""AlterConfigs: replace a resource's explicit configs (the legacy, non-incremental API)."""

from __future__ import annotations

from typing import Any

from ..services import Request
from .common import NO_THROTTLE, make, schema_of
from .config_changes import ConfigChanges, apply_configs, forwarded
from .registry import Api, changes

# AlterConfigs v0-2
API = Api(33, (0, 2), changes(("resources",), "responses"))


async def handle(ctx: Request[ConfigChanges], request: Any) -> Any:
    answer = await forwarded(ctx, request)
    if answer is not None:
        return answer
    m = schema_of(ctx)
    responses = []
    for resource in request.resources:
        new = {c.name: c.value for c in resource.configs if c.value is not None}
        error, message = await apply_configs(ctx, resource, lambda _old: new, request.validate_only)
        responses.append(
            make(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                 resource_type=resource.resource_type, resource_name=resource.resource_name)
        )
    return make(m.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))
