"""ApiVersions: what this broker serves (only what is implemented) and its feature levels."""

from __future__ import annotations

import struct
from typing import Any

from kafkacompat.protocol.messages import make
from kafkacompat.protocol.versions import API_VERSIONS_KEY

from ..services import Request, Settings
from .common import NO_THROTTLE, ErrorCode, schema_of
from .registry import Api, reads, registry

# ApiVersions v0-4
API = Api(API_VERSIONS_KEY, (0, 4), reads())


def unsupported_version_response() -> bytes:
    """A v0 body with UNSUPPORTED_VERSION, for a version this broker does not know.

    Clients read it whatever version they sent, then retry with one listed.
    """
    low, high = API.versions
    return struct.pack(">hi", ErrorCode.unsupported_version.value, 1) + struct.pack(
        ">hhh", API_VERSIONS_KEY, low, high
    )


async def handle(ctx: Request[Settings], request: Any) -> Any:
    m = schema_of(ctx)
    keys = tuple(
        make(m.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in registry().advertised.items()  # every module's declaration, by key
    )
    extra: dict[str, Any] = {}
    if ctx.version >= 3:
        features = ctx.cluster.features
        extra = dict(
            supported_features=tuple(
                make(m.SupportedFeatureKey, name=name, min_version=low, max_version=high)
                for name, (low, high) in features.supported().items()
                if low > 0 or ctx.version >= 4  # clients before v4 refuse a range starting at 0, so Kafka leaves it out
            ),
            finalized_features_epoch=features.epoch,
            finalized_features=tuple(
                make(m.FinalizedFeatureKey, name=name, min_version_level=level, max_version_level=level)
                for name, level in features.finalized().items()
            ),
        )
    return make(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        **extra,
    )
