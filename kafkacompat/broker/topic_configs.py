"""Topic configs under Kafka's names, with Kafka's defaults.

Explicit values live with the topic in the store. A few defaults come from
the topic's stream instead: retention.ms is the stream's time-to-live,
segment.bytes its partitionlet size and cleanup.policy its cleanup policy.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kafkacompat.storage import InvalidPolicyError, StreamPolicy, TopicInfo, cleanup_policy

if TYPE_CHECKING:
    from .cluster import Cluster


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigDef:
    default: str
    kind: int  # DescribeConfigs config_type: 1 boolean, 2 string, 3 int, 5 long, 7 list
    doc: str


# Kafka's config_source values
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
DEFAULT_CONFIG = 5

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef("delete", 7, "delete, compact or both: compact keeps the last record per key."),
    "compression.type": ConfigDef("producer", 2, "Batches are stored as the producer compressed them."),
    "delete.retention.ms": ConfigDef("86400000", 5, "How long tombstones stay after a compacted partitionlet was cleaned."),
    "file.delete.delay.ms": ConfigDef("60000", 5, "Kept for compatibility."),
    "flush.messages": ConfigDef("9223372036854775807", 5, "Durability follows the stream's fsync policy."),
    "flush.ms": ConfigDef("9223372036854775807", 5, "Durability follows the stream's fsync policy."),
    "index.interval.bytes": ConfigDef("4096", 3, "Bytes between sparse index entries."),
    "max.compaction.lag.ms": ConfigDef("9223372036854775807", 5, "Longest a record stays uncompacted."),
    "max.message.bytes": ConfigDef("1048588", 3, "Largest record batch accepted (broker: message.max.bytes)."),
    "message.timestamp.type": ConfigDef("CreateTime", 2, "CreateTime or LogAppendTime."),
    "message.timestamp.before.max.ms": ConfigDef(
        "9223372036854775807", 5, "How far before the broker's clock a CreateTime timestamp may be."),
    "message.timestamp.after.max.ms": ConfigDef(
        "3600000", 5, "How far after the broker's clock a CreateTime timestamp may be (Kafka 4 default)."),
    "min.cleanable.dirty.ratio": ConfigDef("0.5", 6, "Share of uncleaned log that starts a cleaning."),
    "min.compaction.lag.ms": ConfigDef("0", 5, "Shortest time a record stays uncompacted."),
    "min.insync.replicas": ConfigDef("1", 3, "A single broker: always 1."),
    "preallocate": ConfigDef("false", 1, "Kept for compatibility."),
    "retention.bytes": ConfigDef("-1", 5, "Size cap per partition; -1 for none."),
    "retention.ms": ConfigDef("-1", 5, "The stream's time-to-live in ms; -1 keeps forever."),
    "segment.bytes": ConfigDef("1073741824", 3, "The stream's partitionlet size."),
    "segment.index.bytes": ConfigDef("10485760", 3, "Kept for compatibility."),
    "segment.jitter.ms": ConfigDef("0", 5, "Kept for compatibility."),
    "segment.ms": ConfigDef("604800000", 5, "Age at which a partitionlet is rolled."),
    "unclean.leader.election.enable": ConfigDef("false", 1, "A single broker: no elections."),
}

ALLOWED_VALUES: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "compression.type": ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
}


class InvalidConfigError(ValueError):
    pass


def stream_defaults(policy: StreamPolicy) -> dict[str, str]:
    """Values a topic inherits from its stream's policy."""
    return {
        "retention.ms": str(policy.ttl_seconds * 1000) if policy.ttl_seconds > 0 else "-1",
        "retention.bytes": str(policy.retention_bytes),
        "segment.bytes": str(policy.partitionlet_bytes),
        "segment.ms": str(policy.partitionlet_age_ms),
        "cleanup.policy": policy.cleanup_policy,
    }


def effective_configs(cluster: "Cluster", info: TopicInfo) -> dict[str, tuple[str, int]]:
    """name -> (value, config_source) for every topic config."""
    stream = cluster.store.get_stream(info.stream)
    inherited = stream_defaults(stream.policy) if stream else {}
    out: dict[str, tuple[str, int]] = {}
    for name, definition in TOPIC_CONFIGS.items():
        if name in info.configs:
            out[name] = (info.configs[name], DYNAMIC_TOPIC_CONFIG)
        elif name in inherited and inherited[name] != definition.default:
            out[name] = (inherited[name], DYNAMIC_DEFAULT_BROKER_CONFIG)
        else:
            out[name] = (inherited.get(name, _broker_default(cluster, name)), DEFAULT_CONFIG)
    return out


def _broker_default(cluster: "Cluster", name: str) -> str:
    """A topic config's default; max.message.bytes follows the broker's message.max.bytes."""
    if name == "max.message.bytes":
        return str(cluster.config.message_max_bytes)
    return TOPIC_CONFIGS[name].default


def topic_config_value(cluster: "Cluster", info: TopicInfo, name: str) -> str:
    if name in info.configs:
        return info.configs[name]
    stream = cluster.store.get_stream(info.stream)
    if stream is not None:
        inherited = stream_defaults(stream.policy)
        if name in inherited:
            return inherited[name]
    return _broker_default(cluster, name)


def validate_configs(configs: dict[str, str]) -> None:
    """Raise InvalidConfigError for unknown names or values Kafka would refuse."""
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if name == "cleanup.policy":
            try:
                cleanup_policy(value)
            except InvalidPolicyError as exc:
                raise InvalidConfigError(str(exc)) from None
        allowed = ALLOWED_VALUES.get(name)
        if allowed is not None and value not in allowed:
            raise InvalidConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        if definition.kind in (3, 5):
            try:
                int(value)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"{name} must be an integer, got {value!r}") from None
        if definition.kind == 6:
            try:
                float(value)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"{name} must be a number, got {value!r}") from None
        if definition.kind == 1 and value not in ("true", "false"):
            raise InvalidConfigError(f"{name} must be true or false, got {value!r}")
