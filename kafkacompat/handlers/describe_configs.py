"""DescribeConfigs: topic, broker, broker-logger and group configs, with Kafka's sources and synonyms."""

from __future__ import annotations

from typing import Any, Protocol

from ..broker.cluster import TopicError
from ..catalog import broker_configs, group_configs, logger_configs
from ..catalog.topic_configs import Synonym, config_synonyms, definition
from ..catalog.views import BrokerConfigSource
from ..security.acls import Operation
from ..security.authorizer import config_refusal
from ..services import Placement, Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeConfigs v1-4
API = Api(32, (1, 4), reads())


class Reaches(Topics, Placement, Security, BrokerConfigSource, Protocol):
    """What of the broker this module reaches."""

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
UNKNOWN_TYPE = 0

# (name, value, config_source, config_type, read_only, synonyms, documentation)
Row = tuple[str, str | None, int, int, bool, list[Synonym], str | None]


def _topic_rows(ctx: Request[Reaches], name: str) -> list[Row]:
    try:
        info = ctx.cluster.lookup(name).info
    except TopicError as exc:
        raise _Refused(exc.code, str(exc)) from None
    if info is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition, "")  # Kafka's answer carries no message
    return [
        (key, chain[0][1] if chain else definition(key).default, chain[0][2] if chain else 5,
         definition(key).kind, False, chain, definition(key).doc)
        for key, chain in config_synonyms(ctx.cluster, info).items()
    ]


def _broker_rows(ctx: Request[Reaches], name: str) -> list[Row]:
    cluster = ctx.cluster
    if name == "":  # the cluster-wide defaults: only what was set dynamically
        return [
            (key, shown, broker_configs.DYNAMIC_DEFAULT_BROKER_CONFIG, broker_configs.kind_of(key), False,
             [(key, shown, broker_configs.DYNAMIC_DEFAULT_BROKER_CONFIG)], None)
            for key, value in broker_configs.dynamic_values(cluster, "").items()
            for shown in (broker_configs.shown_value(key, value),)
        ]
    _check_broker(ctx, name)
    return [
        (key, value, source, broker_configs.kind_of(key),
         key in broker_configs.BROKER_CONFIGS and not broker_configs.BROKER_CONFIGS[key].dynamic, chain, None)
        for key, (value, source, chain) in broker_configs.describe(cluster).items()
    ]


def _logger_rows(ctx: Request[Reaches], name: str) -> list[Row]:
    _check_broker(ctx, name)
    return [
        (logger, level, logger_configs.DYNAMIC_BROKER_LOGGER_CONFIG, UNKNOWN_TYPE, False, [], None)
        for logger, level in logger_configs.describe().items()
    ]


def _group_rows(ctx: Request[Reaches], name: str) -> list[Row]:
    return [
        (key, value, source, group_configs.GROUP_CONFIGS[key][1], False, chain, None)
        for key, (value, source, chain) in group_configs.describe(ctx.cluster, name).items()
    ]


def _check_broker(ctx: Request[Reaches], name: str) -> None:
    if name != str(ctx.cluster.node_id):
        raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.cluster.node_id}, but received {name}")


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


ROWS = {TOPIC: _topic_rows, BROKER: _broker_rows, BROKER_LOGGER: _logger_rows, GROUP: _group_rows}


def _entry(m: Any, row: Row, with_synonyms: bool, with_docs: bool) -> Any:
    name, value, source, kind, read_only, chain, doc = row
    return make(
        m.DescribeConfigsResourceResult,
        name=name, value=value, read_only=read_only, config_source=source, is_sensitive=False,
        synonyms=tuple(make(m.DescribeConfigsSynonym, name=n, value=v, source=s) for n, v, s in chain)
        if with_synonyms else (),
        config_type=kind, documentation=doc if with_docs else None, is_default=source == 5,
    )


def _describe(ctx: Request[Reaches], m: Any, resource: Any, request: Any) -> tuple[ErrorCode, str | None, list[Any]]:
    rows = ROWS.get(resource.resource_type)
    if rows is None:
        return ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported", []
    refused = config_refusal(ctx, Operation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
    if refused is not None:
        return *refused, []
    try:
        found = rows(ctx, resource.resource_name)
    except _Refused as exc:
        return exc.code, str(exc), []
    keys = set(resource.configuration_keys) if resource.configuration_keys else None
    with_synonyms = getattr(request, "include_synonyms", False)
    with_docs = getattr(request, "include_documentation", False)
    return ErrorCode.none, None, [_entry(m, row, with_synonyms, with_docs) for row in found if keys is None or row[0] in keys]


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    results = []
    for resource in request.resources:
        error, message, configs = _describe(ctx, m, resource, request)
        results.append(
            make(
                m.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(configs),
            )
        )
    return make(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
