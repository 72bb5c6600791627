"""DescribeConfigs: topic configs (Kafka names and defaults) and broker settings."""

from __future__ import annotations

from typing import Any

from ..broker.cluster import TopicError
from ..broker.topic_configs import TOPIC_CONFIGS, effective_configs
from .common import NO_THROTTLE, ErrorCode, make, schema_of

TOPIC, BROKER = 2, 4
STATIC_BROKER_CONFIG = 4


def broker_configs(cluster: Any) -> dict[str, tuple[str, int]]:
    """name -> (value, config type) of the broker settings tools look at."""
    config = cluster.config
    default = cluster.store.get_stream(cluster.default_stream)
    return {
        "broker.id": (str(cluster.node_id), 3),
        "node.id": (str(cluster.node_id), 3),
        "advertised.listeners": (f"PLAINTEXT://{cluster.host}:{cluster.port}", 7),
        "auto.create.topics.enable": (str(config.auto_create_topics).lower(), 1),
        "num.partitions": (str(default.policy.default_partitions if default else 1), 3),
        "default.replication.factor": ("1", 3),
        "min.insync.replicas": ("1", 3),
        "offsets.topic.replication.factor": ("1", 2),
        "message.max.bytes": (str(config.message_max_bytes), 3),
        "socket.request.max.bytes": (str(config.socket_request_max_bytes), 3),
        "max.connections": (str(config.max_connections), 3),
        "max.connections.per.ip": (str(config.max_connections_per_ip), 3),
        "connections.max.idle.ms": (str(config.connections_max_idle_ms), 5),
        "queued.max.request.bytes": (str(config.queued_max_request_bytes), 5),
        "log.dirs": (",".join([config.data_dir, *config.volumes]), 2),
    }


def _entry(m: Any, name: str, value: str, source: int, kind: int, read_only: bool, doc: str | None) -> Any:
    return make(
        m.DescribeConfigsResourceResult,
        name=name, value=value, read_only=read_only, config_source=source, is_sensitive=False,
        synonyms=(), config_type=kind, documentation=doc, is_default=source == 5,
    )


def _describe(ctx: Any, m: Any, resource: Any, with_docs: bool) -> tuple[ErrorCode, str | None, list[Any]]:
    cluster = ctx.cluster
    keys = set(resource.configuration_keys) if resource.configuration_keys else None
    if resource.resource_type == TOPIC:
        try:
            info = cluster.lookup(resource.resource_name).info
        except TopicError as exc:
            return exc.code, str(exc), []
        if info is None:
            return ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name} does not exist", []
        return ErrorCode.none, None, [
            _entry(m, name, value, source, TOPIC_CONFIGS[name].kind, False,
                   TOPIC_CONFIGS[name].doc if with_docs else None)
            for name, (value, source) in effective_configs(cluster, info).items()
            if keys is None or name in keys
        ]
    if resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(cluster.node_id)):
            return ErrorCode.invalid_request, f"unknown broker {resource.resource_name}", []
        return ErrorCode.none, None, [
            _entry(m, name, value, STATIC_BROKER_CONFIG, kind, True, None)
            for name, (value, kind) in broker_configs(cluster).items()
            if keys is None or name in keys
        ]
    return ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported", []


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    with_docs = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        error, message, configs = _describe(ctx, m, resource, with_docs)
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
