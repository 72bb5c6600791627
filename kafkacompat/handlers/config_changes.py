"""The shared part of AlterConfigs and IncrementalAlterConfigs: one resource's change, by type.

Each call gets the resource's current explicit values and a function that
returns the new ones; topics keep them with the topic, dynamic broker
configs and group configs in the store's settings, broker loggers in the
running process's logging levels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..catalog import broker_configs, group_configs, logger_configs
from ..catalog.topic_configs import InvalidConfigError, validate_configs
from ..catalog.views import BrokerConfigSource
from ..security.acls import Operation
from ..security.authorizer import config_refusal
from ..security.principal import WORKER
from ..services import Placement, Request, Security, Topics
from .common import ErrorCode, at_controller, storage_error_code

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
Change = Callable[[dict[str, str]], dict[str, str]]


class ConfigChanges(Topics, Placement, Security, BrokerConfigSource, Protocol):
    """What of the broker changing configs reaches (AlterConfigs and IncrementalAlterConfigs declare it)."""


async def forwarded(ctx: Request[ConfigChanges], request: Any) -> Any | None:
    """Worker 0's answer to a change of topic or group configs or of the brokers' defaults sent to another
    worker of `serve --workers N` (worker 0 writes the catalog and the settings; Kafka's brokers forward
    config changes to their controller too); None where this broker makes the change. Worker 0 judges
    the worker that forwards it (the broker itself, workers/channel.py), so the client's ALTER_CONFIGS
    is checked here first: a request naming a resource it may not change is answered here, that
    resource refused (before stop 57 every change sent to another worker was refused when an
    authorizer was on). So is a change of this worker's own dynamic configs (a broker resource named
    by its id), which worker 0 keeps in the store's settings, where this worker reads them; its
    loggers are changed here."""
    if not all(_kept_by_controller(ctx, r) and config_refusal(ctx, Operation.ALTER_CONFIGS, r.resource_type,
                                                               r.resource_name, log_denied=False) is None
               for r in request.resources):  # a refusal's audit line is written where the request is answered
        return None
    return await at_controller(ctx, request)


def _kept_by_controller(ctx: Request[ConfigChanges], resource: Any) -> bool:
    if resource.resource_type == BROKER:  # the brokers' defaults, or this broker's own (another's is refused)
        return resource.resource_name in ("", str(ctx.cluster.node_id))
    return resource.resource_type in (TOPIC, GROUP)


async def apply_configs(ctx: Request[ConfigChanges], resource: Any, change: Change, validate_only: bool) -> tuple[ErrorCode, str | None]:
    """(error code, message) of changing one resource's configs."""
    kind, name = resource.resource_type, resource.resource_name
    refused = config_refusal(ctx, Operation.ALTER_CONFIGS, kind, name)
    if refused is not None:
        return refused
    try:
        if kind == TOPIC:
            await _topic(ctx, name, change, validate_only)
        elif kind == BROKER:
            await _broker(ctx, name, change, validate_only)
        elif kind == BROKER_LOGGER:
            _logger(ctx, name, change, validate_only)
        elif kind == GROUP:
            await _group(ctx, name, change, validate_only)
        else:
            return ErrorCode.invalid_request, f"resource type {kind} is not supported"
    except TopicError as exc:
        return exc.code, str(exc)
    except broker_configs.RefusedError as exc:
        return ErrorCode.invalid_request, str(exc)
    except (InvalidConfigError, ValueError) as exc:
        return ErrorCode.invalid_config, str(exc)
    except storage.StorageError as exc:
        return storage_error_code(exc), str(exc)
    return ErrorCode.none, None


async def _topic(ctx: Request[ConfigChanges], name: str, change: Change, validate_only: bool) -> None:
    cluster = ctx.cluster
    info = cluster.lookup(name).info
    if info is None:
        raise TopicError(ErrorCode.unknown_topic_or_partition, "")  # Kafka's answer carries no message
    new = change(dict(info.configs))
    validate_configs(new)
    if not validate_only:
        await cluster.store.set_topic_configs(info.stream, info.name, new)


def _check_broker(ctx: Request[ConfigChanges], name: str) -> None:
    if name != str(ctx.cluster.node_id):
        raise InvalidConfigError(f"Unexpected broker id, expected {ctx.cluster.node_id}, but received {name}")


async def _broker(ctx: Request[ConfigChanges], name: str, change: Change, validate_only: bool) -> None:
    cluster = ctx.cluster
    if name != "" and ctx.principal != WORKER:  # another worker's own configs: it checked their name
        _check_broker(ctx, name)
    old = broker_configs.dynamic_values(cluster, name)
    new = change(dict(old))
    broker_configs.check_changes({key: new.get(key) for key in set(old) | set(new) if old.get(key) != new.get(key)},
                                 name)
    if not validate_only:
        await broker_configs.set_dynamic(cluster, name, new)


def _logger(ctx: Request[ConfigChanges], name: str, change: Change, validate_only: bool) -> None:
    _check_broker(ctx, name)
    old = logger_configs.describe()
    new = change(dict(old))
    changes = {key: new.get(key) for key in set(old) | set(new) if old.get(key) != new.get(key)}
    logger_configs.check_changes(changes)
    if not validate_only:
        logger_configs.apply(changes)


async def _group(ctx: Request[ConfigChanges], name: str, change: Change, validate_only: bool) -> None:
    new = change(group_configs.group_values(ctx.cluster, name))
    group_configs.check(new, ctx.cluster.config)
    if not validate_only:
        await group_configs.set_group_values(ctx.cluster, name, new)
