"""The shared part of AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..broker.topic_configs import InvalidConfigError, validate_configs
from .common import ErrorCode, storage_error_code

TOPIC, BROKER = 2, 4


async def apply_topic_configs(
    ctx: Any, resource: Any, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    cluster = ctx.cluster
    if resource.resource_type == BROKER:
        return ErrorCode.invalid_request, "broker configs are static; set them in the broker's config file"
    if resource.resource_type != TOPIC:
        return ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"
    try:
        info = cluster.lookup(resource.resource_name).info
    except TopicError as exc:
        return exc.code, str(exc)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name} does not exist"
    try:
        new = change(dict(info.configs))
        validate_configs(new)
    except (InvalidConfigError, ValueError) as exc:
        return ErrorCode.invalid_config, str(exc)
    if validate_only:
        return ErrorCode.none, None
    try:
        await cluster.store.set_topic_configs(info.stream, info.name, new)
    except storage.StorageError as exc:
        return storage_error_code(exc), str(exc)
    return ErrorCode.none, None
