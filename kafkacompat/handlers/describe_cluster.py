"""DescribeCluster: the live brokers and the controller (the lowest live node id)."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import CLUSTER_NAME, ResourceType
from ..services import Placement, Request, Security
from .common import ALL_CLUSTER_OPERATIONS, NO_THROTTLE, UNSET_OPERATIONS, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeCluster v0-1
API = Api(60, (0, 1), reads())


class Reaches(Placement, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    return make(
        m.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=getattr(request, "endpoint_type", 1),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.view.controller_id,
        brokers=tuple(make(m.DescribeClusterBroker, broker_id=b.node_id, host=b.host, port=b.port, rack=None)
                      for b in cluster.brokers_for(ctx.listener)),
        cluster_authorized_operations=(
            cluster.authorizer.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, ALL_CLUSTER_OPERATIONS)
            if request.include_cluster_authorized_operations else UNSET_OPERATIONS
        ),
    )
