"""API names and the kio schema of each (API, version): whether it is flexible, its request and response classes.

Which versions this broker serves is not here: each handler module declares
its own (kafkacompat.handlers.registry), and only what is implemented is
advertised: Java clients call some APIs (DescribeTopicPartitions,
GetTelemetrySubscriptions, ...) by themselves as soon as they appear in
ApiVersions.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from kio.index import KioIndexError, load_entity_module
from kio.schema.index import api_key_map
from kio.static.constants import EntityType

from .admin_api import STREAM_ADMIN_KEY, STREAM_ADMIN_NAME, WORKER_STATE_KEY, WORKER_STATE_NAME
from .replication_api import REPLICATE_KEY, REPLICATE_NAME

API_VERSIONS_KEY = 18


def api_name(api_key: int) -> str:
    if api_key == STREAM_ADMIN_KEY:
        return STREAM_ADMIN_NAME
    if api_key == REPLICATE_KEY:
        return REPLICATE_NAME
    if api_key == WORKER_STATE_KEY:
        return WORKER_STATE_NAME
    return api_key_map.get(api_key, f"api_{api_key}")


@functools.cache
def schema(api_key: int, version: int, kind: Literal[EntityType.request, EntityType.response]) -> type[Any]:
    """The kio dataclass for (api, version, request|response)."""
    module = load_entity_module(api_key_map[api_key], version, kind)
    suffix = "Request" if kind == EntityType.request else "Response"
    for name in dir(module):
        obj = getattr(module, name)
        if (
            isinstance(obj, type)
            and name.endswith(suffix)
            and getattr(obj, "__type__", None) == kind
            and getattr(obj, "__api_key__", None) == api_key
        ):
            return obj
    raise LookupError(f"no {suffix} schema for api {api_key} v{version}")


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api, version) uses compact encodings and tagged fields."""
    try:
        return bool(schema(api_key, version, EntityType.request).__flexible__)
    except (LookupError, KioIndexError, ImportError):
        return False
