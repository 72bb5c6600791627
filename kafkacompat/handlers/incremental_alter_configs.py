"""IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on topic, broker, broker-logger and group configs.

APPEND and SUBTRACT start from the config's own value or, for a topic without
one, from the value it has (as Kafka starts from the config's default):
APPEND compact on a new topic gives delete,compact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..catalog.topic_configs import topic_config_value
from ..services import Request
from .common import NO_THROTTLE, make, schema_of
from .config_changes import TOPIC, ConfigChanges, apply_configs, forwarded
from .registry import Api, changes

# IncrementalAlterConfigs v0-1
API = Api(44, (0, 1), changes(("resources",), "responses"))

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _inherited(ctx: Request[ConfigChanges], resource: Any) -> Callable[[str], str]:
    """The value a list config of this resource has when it has none of its own."""
    if resource.resource_type == TOPIC:
        info = ctx.cluster.lookup(resource.resource_name).info
        if info is not None:
            return lambda name: topic_config_value(ctx.cluster, info, name)
    return lambda name: ""


def _changed(old: dict[str, str], configs: Any, inherited: Callable[[str], str]) -> dict[str, str]:
    new = dict(old)
    for c in configs:
        if c.config_operation == SET:
            new[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        else:
            current = new[c.name] if c.name in new else inherited(c.name)
            items = [v for v in current.split(",") if v]
            values = [v for v in (c.value or "").split(",") if v]
            if c.config_operation == APPEND:
                items += [v for v in values if v not in items]
            elif c.config_operation == SUBTRACT:
                items = [v for v in items if v not in values]
            else:
                raise ValueError(f"unknown config operation {c.config_operation}")
            new[c.name] = ",".join(items)
    return new


async def handle(ctx: Request[ConfigChanges], request: Any) -> Any:
    answer = await forwarded(ctx, request)
    if answer is not None:
        return answer
    m = schema_of(ctx)
    responses = []
    for resource in request.resources:
        configs, inherited = resource.configs, _inherited(ctx, resource)
        error, message = await apply_configs(
            ctx, resource, lambda old: _changed(old, configs, inherited), request.validate_only
        )
        responses.append(
            make(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                 resource_type=resource.resource_type, resource_name=resource.resource_name)
        )
    return make(m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))
