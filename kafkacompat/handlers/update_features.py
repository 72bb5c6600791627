"""UpdateFeatures: change finalized feature levels, as Kafka 4.1's controller does (`kafka-features`).

The connection's cluster gate refuses principals without ALTER on the
cluster (CLUSTER_AUTHORIZATION_FAILED). A refusal is a top-level error
naming the first feature refused (in Kafka's HashMap order), and fails
every update of the request; success lists each feature in request order
(v0-1) or nothing (v2), as Kafka answers.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..broker.features import FeatureUpdate, UpgradeType
from ..services import Placement, Request, Settings
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes

# UpdateFeatures v0-2: v2 answers no per-feature results; error answers: v2 lists no results on success, but does on error
API = Api(57, (0, 2), changes(("feature_updates",), "results"))


class Reaches(Placement, Settings, Protocol):
    """What of the broker this module reaches."""

log = logging.getLogger(__name__)
_FAILED_ALL = "The update failed for all features since the following feature had an error: "


def _updates(version: int, request: Any) -> list[FeatureUpdate]:
    """v0 says allow_downgrade (a safe downgrade); v1+ its upgrade type."""
    out = []
    for u in request.feature_updates:
        if version == 0:
            kind = UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE
        else:
            kind = u.upgrade_type
        out.append(FeatureUpdate(u.feature, u.max_version_level, int(kind)))
    return out


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    updates = _updates(ctx.version, request)
    refused = await cluster.features.update(updates, getattr(request, "validate_only", False),
                                            cluster.view.controller_id)
    if refused is not None:
        answer: dict[str, Any] = dict(error_code=refused.error, error_message=_FAILED_ALL + refused.message)
        if ctx.version <= 1:
            answer["results"] = ()
        return make(m.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, **answer)
    if updates and not getattr(request, "validate_only", False):
        log.warning("%s set feature levels %s (epoch %d)", ctx.principal,
                    ", ".join(f"{u.name}={u.level}" for u in updates), cluster.features.epoch)
    answer = dict(error_code=ErrorCode.none, error_message=None)
    if ctx.version <= 1:
        answer["results"] = tuple(make(m.UpdatableFeatureResult, feature=u.name, error_code=ErrorCode.none,
                                       error_message="NONE") for u in updates)  # Kafka's words, request order
    return make(m.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, **answer)
