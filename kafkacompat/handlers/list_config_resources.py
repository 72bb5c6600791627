"""ListConfigResources (v1; v0 was ListClientMetricsResources): what has configs to describe.

`kafka-configs --entity-type groups` asks for it first. As Kafka 4.1
answers: groups that have configs of their own, this broker (as BROKER and
BROKER_LOGGER) and every topic; no client-metrics resources (v0 lists only
those, so it answers an empty list).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..catalog import group_configs
from ..catalog.views import ConfigSource
from ..services import Placement, Request, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# ListConfigResources v0-1 (v0: ListClientMetricsResources)
API = Api(74, (0, 1), reads())


class Reaches(Topics, Placement, ConfigSource, Protocol):
    """What of the broker this module reaches."""

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SERVED = (GROUP, BROKER_LOGGER, BROKER, TOPIC, CLIENT_METRICS)


def _resources(ctx: Request[Reaches], kind: int) -> list[str]:
    cluster = ctx.cluster
    if kind == GROUP:
        return group_configs.groups_with_configs(cluster)
    if kind in (BROKER, BROKER_LOGGER):
        return [str(cluster.node_id)]
    if kind == TOPIC:
        return [cluster.listed_name(info.stream, info.name, ctx.client_software_name) for info in cluster.store.list_topics()]
    return []


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.version == 0:
        return make(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                    config_resources=())
    kinds = tuple(request.resource_types) or SERVED
    unknown = [kind for kind in kinds if kind not in SERVED]
    if unknown:
        return make(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.unsupported_version, config_resources=())
    resources = tuple(
        make(m.ConfigResource, resource_name=name, resource_type=kind)
        for kind in kinds for name in _resources(ctx, kind)
    )
    return make(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                config_resources=resources)
