"""Topic configs under Kafka's names, with Kafka's defaults.

Explicit values live with the topic in the store. A few defaults come from
the topic's stream instead: retention.ms is the stream's time-to-live,
segment.bytes its partitionlet size and cleanup.policy its cleanup policy.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kafkacompat.storage import FsyncPolicy, InvalidPolicyError, StreamPolicy, TopicInfo, cleanup_policy

if TYPE_CHECKING:
    from .views import ConfigSource


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
    "retention.ms": ConfigDef("604800000", 5, "The stream's time-to-live in ms (7 days unless the stream says "
                                              "otherwise, as on Kafka and MapR); -1 keeps forever."),
    "segment.bytes": ConfigDef("1073741824", 3, "The stream's partitionlet size."),
    "segment.index.bytes": ConfigDef("10485760", 3, "Kept for compatibility."),
    "segment.jitter.ms": ConfigDef("0", 5, "Kept for compatibility."),
    "segment.ms": ConfigDef("604800000", 5, "Age at which a partitionlet is rolled."),
    "unclean.leader.election.enable": ConfigDef("false", 1, "A single broker: no elections."),
    "compression.gzip.level": ConfigDef("-1", 3, "Kept for compatibility: batches keep the producer's compression."),
    "compression.lz4.level": ConfigDef("9", 3, "Kept for compatibility: batches keep the producer's compression."),
    "compression.zstd.level": ConfigDef("3", 3, "Kept for compatibility: batches keep the producer's compression."),
    "follower.replication.throttled.replicas": ConfigDef("", 7, "A single broker: no replication to throttle."),
    "leader.replication.throttled.replicas": ConfigDef("", 7, "A single broker: no replication to throttle."),
    "local.retention.bytes": ConfigDef("-2", 5, "No tiered storage: -2, the same as retention.bytes."),
    "local.retention.ms": ConfigDef("-2", 5, "No tiered storage: -2, the same as retention.ms."),
    "remote.log.copy.disable": ConfigDef("false", 1, "No tiered storage."),
    "remote.log.delete.on.disable": ConfigDef("false", 1, "No tiered storage."),
    "remote.storage.enable": ConfigDef("false", 1, "No tiered storage: only false."),
}

# Confluent Server's schema validation switches (docs/schemas.md): accepted on a topic, listed only where set,
# so a topic without them describes exactly as on Apache Kafka.
KEY_SCHEMA_VALIDATION = "confluent.key.schema.validation"
VALUE_SCHEMA_VALIDATION = "confluent.value.schema.validation"
KEY_SUBJECT_STRATEGY = "confluent.key.subject.name.strategy"
VALUE_SUBJECT_STRATEGY = "confluent.value.subject.name.strategy"
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SUBJECT_STRATEGIES = tuple(f"{package}{name}" for name in ("TopicNameStrategy", "RecordNameStrategy",
                                                           "TopicRecordNameStrategy")
                           for package in ("", _STRATEGY_PACKAGE))
OPT_IN_CONFIGS: dict[str, ConfigDef] = {
    KEY_SCHEMA_VALIDATION: ConfigDef("false", 1, "Refuse records whose key does not carry a schema id registered "
                                                  "under the subject <topic>-key."),
    VALUE_SCHEMA_VALIDATION: ConfigDef("false", 1, "Refuse records whose value does not carry a schema id "
                                                    "registered under the subject <topic>-value."),
    KEY_SUBJECT_STRATEGY: ConfigDef(_STRATEGY_PACKAGE + "TopicNameStrategy", 2,
                                    "The subject validated keys' schema ids are looked up under."),
    VALUE_SUBJECT_STRATEGY: ConfigDef(_STRATEGY_PACKAGE + "TopicNameStrategy", 2,
                                      "The subject validated values' schema ids are looked up under."),
}


def definition(name: str) -> ConfigDef:
    """A topic config's definition, Kafka's or an opt-in one."""
    return TOPIC_CONFIGS.get(name) or OPT_IN_CONFIGS[name]


# Topic config -> the broker config Kafka 4.1 names as its synonym (DescribeConfigs include_synonyms).
BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
# Broker synonyms Kafka 4.1 leaves unset, so they are listed only once a stream sets them.
_UNSET_BROKER_DEFAULTS = frozenset({"log.retention.ms", "log.roll.ms"})
# Set cluster-wide at format time by Kafka 4.x (KIP-966), hence its dynamic default source there and here.
CLUSTER_DEFAULTS: dict[str, str] = {"min.insync.replicas": "1"}

ALLOWED_VALUES: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "compression.type": ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "remote.storage.enable": ("false",),
    KEY_SCHEMA_VALIDATION: ("true", "false"),
    VALUE_SCHEMA_VALIDATION: ("true", "false"),
    KEY_SUBJECT_STRATEGY: SUBJECT_STRATEGIES,
    VALUE_SUBJECT_STRATEGY: SUBJECT_STRATEGIES,
}
# Lower bounds Kafka's LogConfig puts on configs the store acts on (its Range.atLeast): retention.ms
# below -1 is refused there, not taken as "forever"
AT_LEAST: dict[str, int] = {"retention.ms": -1}


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


Synonym = tuple[str, str | None, int]  # (name, value (None: sensitive), config_source)


def config_synonyms(cluster: "ConfigSource", info: TopicInfo) -> dict[str, list[Synonym]]:
    """name -> where its value comes from, most precedent first, as Kafka lists synonyms.

    The topic's own value, then its stream's (the part a broker-wide dynamic
    default plays in Kafka), then the built-in default under the broker's name.
    """
    stream = cluster.store.get_stream(info.stream)
    inherited = stream_defaults(stream.policy) if stream else {}
    out: dict[str, list[Synonym]] = {}
    for name, definition in TOPIC_CONFIGS.items():
        chain: list[Synonym] = []
        if name in info.configs:
            chain.append((name, info.configs[name], DYNAMIC_TOPIC_CONFIG))
        broker_name = BROKER_SYNONYMS.get(name)
        if name in CLUSTER_DEFAULTS:
            chain.append((name, CLUSTER_DEFAULTS[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        elif name in inherited and inherited[name] != definition.default:
            chain.append((broker_name or name, inherited[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if broker_name is not None and broker_name not in _UNSET_BROKER_DEFAULTS:
            chain.append((broker_name, _broker_default(cluster, name), DEFAULT_CONFIG))
        out[name] = chain
    for name in OPT_IN_CONFIGS.keys() & info.configs.keys():
        out[name] = [(name, info.configs[name], DYNAMIC_TOPIC_CONFIG)]
    return out


def effective_configs(cluster: "ConfigSource", info: TopicInfo) -> dict[str, tuple[str, int]]:
    """name -> (value, config_source) for every topic config: the first of its synonyms."""
    return {
        name: (chain[0][1], chain[0][2]) if chain else (_broker_default(cluster, name), DEFAULT_CONFIG)
        for name, chain in config_synonyms(cluster, info).items()
    }


def _broker_default(cluster: "ConfigSource", name: str) -> str:
    """A topic config's default; max.message.bytes follows the broker's message.max.bytes."""
    if name == "max.message.bytes":
        return str(cluster.config.message_max_bytes)
    return TOPIC_CONFIGS[name].default


def topic_config_value(cluster: "ConfigSource", info: TopicInfo, name: str) -> str:
    if name in info.configs:
        return info.configs[name]
    stream = cluster.store.get_stream(info.stream)
    if stream is not None:
        inherited = stream_defaults(stream.policy)
        if name in inherited:
            return inherited[name]
    return _broker_default(cluster, name)


@dataclasses.dataclass(frozen=True, slots=True)
class ProduceConfigs:
    """What every produce request to a topic consults, resolved once per version of the topic."""

    max_message_bytes: int
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    compacted: bool  # records without a key are refused
    log_append_time: bool  # message.timestamp.type=LogAppendTime
    fsync_always: bool  # the stream answers only after an fsync
    # confluent.key/value.schema.validation on: the subject name strategy the key / value is checked by
    key_schemas: str | None = None
    value_schemas: str | None = None


# id(TopicInfo) -> (the info, its stream's policy, message.max.bytes, the configs). TopicInfo and
# StreamPolicy are frozen and replaced whenever a config changes, so an entry holds while both
# objects are the ones it was made from (the identity check also guards against a reused id).
_produce_configs: dict[int, tuple[TopicInfo, StreamPolicy | None, int, ProduceConfigs]] = {}
_PRODUCE_CONFIGS_KEPT = 4096


def _strategy(info: TopicInfo, switch: str, strategy: str) -> str | None:
    """The short name of the subject name strategy a validated key or value is checked by; None: not validated."""
    if info.configs.get(switch) != "true":
        return None
    return info.configs.get(strategy, "TopicNameStrategy").rsplit(".", 1)[-1]


def produce_configs(cluster: "ConfigSource", info: TopicInfo) -> ProduceConfigs:
    """topic_config_value for a produce request's configs, without resolving each one per request."""
    stream = cluster.store.get_stream(info.stream)
    policy = stream.policy if stream is not None else None
    message_max_bytes = cluster.config.message_max_bytes
    cached = _produce_configs.get(id(info))
    if cached is not None and cached[0] is info and cached[1] is policy and cached[2] == message_max_bytes:
        return cached[3]
    configs = ProduceConfigs(
        max_message_bytes=int(topic_config_value(cluster, info, "max.message.bytes")),
        timestamp_before_max_ms=int(topic_config_value(cluster, info, "message.timestamp.before.max.ms")),
        timestamp_after_max_ms=int(topic_config_value(cluster, info, "message.timestamp.after.max.ms")),
        compacted="compact" in topic_config_value(cluster, info, "cleanup.policy"),
        log_append_time=topic_config_value(cluster, info, "message.timestamp.type") == "LogAppendTime",
        fsync_always=policy is not None and policy.fsync == FsyncPolicy.ALWAYS,
        key_schemas=_strategy(info, KEY_SCHEMA_VALIDATION, KEY_SUBJECT_STRATEGY),
        value_schemas=_strategy(info, VALUE_SCHEMA_VALIDATION, VALUE_SUBJECT_STRATEGY),
    )
    if len(_produce_configs) >= _PRODUCE_CONFIGS_KEPT:
        _produce_configs.clear()
    _produce_configs[id(info)] = (info, policy, message_max_bytes, configs)
    return configs


def validate_configs(configs: dict[str, str]) -> None:
    """Raise InvalidConfigError for unknown names or values Kafka would refuse."""
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name) or OPT_IN_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
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
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                         f"{'INT' if definition.kind == 3 else 'LONG'}") from None
        low = AT_LEAST.get(name)
        if low is not None and int(value) < low:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
        if definition.kind == 6:
            try:
                float(value)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                         "DOUBLE") from None
        if definition.kind == 1 and value not in ("true", "false"):
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Expected value to be "
                                     "either true or false")
