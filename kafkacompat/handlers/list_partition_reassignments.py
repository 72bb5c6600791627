"""ListPartitionReassignments: a reassignment onto the one broker completes at once, so none is ever ongoing."""

from __future__ import annotations

from typing import Any

from ..services import Request
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# ListPartitionReassignments v0
API = Api(46, (0, 0), reads())


async def handle(ctx: Request[object], request: Any) -> Any:
    m = schema_of(ctx)
    return make(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, topics=())
