"""IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on topic, broker, broker-logger and group configs."""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, make, schema_of
from .config_changes import apply_configs

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _changed(old: dict[str, str], configs: Any) -> dict[str, str]:
    new = dict(old)
    for c in configs:
        if c.config_operation == SET:
            new[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        else:
            items = [v for v in new.get(c.name, "").split(",") if v]
            values = [v for v in (c.value or "").split(",") if v]
            if c.config_operation == APPEND:
                items += [v for v in values if v not in items]
            elif c.config_operation == SUBTRACT:
                items = [v for v in items if v not in values]
            else:
                raise ValueError(f"unknown config operation {c.config_operation}")
            new[c.name] = ",".join(items)
    return new


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    responses = []
    for resource in request.resources:
        error, message = await apply_configs(
            ctx, resource, lambda old, cs=resource.configs: _changed(old, cs), request.validate_only
        )
        responses.append(
            make(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                 resource_type=resource.resource_type, resource_name=resource.resource_name)
        )
    return make(m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))
