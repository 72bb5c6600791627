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
    """Everything about one topic config, so adding one is adding its entry to TOPIC_CONFIGS (or OPT_IN_CONFIGS):
    CreateTopics, AlterConfigs and the admin CLI check values by it, DescribeConfigs lists it with its synonyms.
    """

    default: str
    kind: int  # DescribeConfigs config_type: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7 list
    doc: str
    synonym: str | None = None  # the broker config Kafka 4.1 names as its synonym (DescribeConfigs include_synonyms)
    synonym_unset: bool = False  # Kafka 4.1 leaves that broker config unset: listed only once a stream sets it
    cluster_default: str | None = None  # a cluster-wide default (Kafka's dynamic default broker config source)
    allowed: tuple[str, ...] | None = None  # the only values accepted
    at_least: int | None = None  # the lowest value accepted (Kafka's Range.atLeast)


# Kafka's config_source values
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
DEFAULT_CONFIG = 5

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef("delete", 7, "delete, compact or both: compact keeps the last record per key.",
                                synonym="log.cleanup.policy"),
    "compression.type": ConfigDef("producer", 2, "Batches are stored as the producer compressed them.",
                                  synonym="compression.type",
                                  allowed=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    "delete.retention.ms": ConfigDef("86400000", 5,
                                     "How long tombstones stay after a compacted partitionlet was cleaned.",
                                     synonym="log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ConfigDef("60000", 5, "Kept for compatibility.", synonym="log.segment.delete.delay.ms"),
    "flush.messages": ConfigDef("9223372036854775807", 5, "Durability follows the stream's fsync policy.",
                                synonym="log.flush.interval.messages"),
    "flush.ms": ConfigDef("9223372036854775807", 5, "Durability follows the stream's fsync policy."),
    "index.interval.bytes": ConfigDef("4096", 3, "Bytes between sparse index entries.",
                                      synonym="log.index.interval.bytes"),
    "max.compaction.lag.ms": ConfigDef("9223372036854775807", 5, "Longest a record stays uncompacted.",
                                       synonym="log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ConfigDef("1048588", 3, "Largest record batch accepted (broker: message.max.bytes).",
                                   synonym="message.max.bytes"),
    "message.timestamp.type": ConfigDef("CreateTime", 2, "CreateTime or LogAppendTime.",
                                        synonym="log.message.timestamp.type",
                                        allowed=("CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": ConfigDef(
        "9223372036854775807", 5, "How far before the broker's clock a CreateTime timestamp may be.",
        synonym="log.message.timestamp.before.max.ms"),
    "message.timestamp.after.max.ms": ConfigDef(
        "3600000", 5, "How far after the broker's clock a CreateTime timestamp may be (Kafka 4 default).",
        synonym="log.message.timestamp.after.max.ms"),
    "min.cleanable.dirty.ratio": ConfigDef("0.5", 6, "Share of uncleaned log that starts a cleaning.",
                                           synonym="log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ConfigDef("0", 5, "Shortest time a record stays uncompacted.",
                                       synonym="log.cleaner.min.compaction.lag.ms"),
    # set cluster-wide at format time by Kafka 4.x (KIP-966), hence its dynamic default source there and here
    "min.insync.replicas": ConfigDef("1", 3, "A single broker: always 1.", synonym="min.insync.replicas",
                                     cluster_default="1"),
    "preallocate": ConfigDef("false", 1, "Kept for compatibility.", synonym="log.preallocate"),
    "retention.bytes": ConfigDef("-1", 5, "Size cap per partition; -1 for none.", synonym="log.retention.bytes"),
    # Kafka's LogConfig refuses retention.ms below -1 (Range.atLeast), rather than taking it as "forever"
    "retention.ms": ConfigDef("604800000", 5, "The stream's time-to-live in ms (7 days unless the stream says "
                                              "otherwise, as on Kafka and MapR); -1 keeps forever.",
                              synonym="log.retention.ms", synonym_unset=True, at_least=-1),
    "segment.bytes": ConfigDef("1073741824", 3, "The stream's partitionlet size.", synonym="log.segment.bytes"),
    "segment.index.bytes": ConfigDef("10485760", 3, "Kept for compatibility.", synonym="log.index.size.max.bytes"),
    "segment.jitter.ms": ConfigDef("0", 5, "Kept for compatibility."),
    "segment.ms": ConfigDef("604800000", 5, "Age at which a partitionlet is rolled.", synonym="log.roll.ms",
                            synonym_unset=True),
    "unclean.leader.election.enable": ConfigDef("false", 1, "A single broker: no elections.",
                                                synonym="unclean.leader.election.enable"),
    "compression.gzip.level": ConfigDef("-1", 3, "Kept for compatibility: batches keep the producer's compression.",
                                        synonym="compression.gzip.level"),
    "compression.lz4.level": ConfigDef("9", 3, "Kept for compatibility: batches keep the producer's compression.",
                                       synonym="compression.lz4.level"),
    "compression.zstd.level": ConfigDef("3", 3, "Kept for compatibility: batches keep the producer's compression.",
                                        synonym="compression.zstd.level"),
    "follower.replication.throttled.replicas": ConfigDef("", 7, "A single broker: no replication to throttle."),
    "leader.replication.throttled.replicas": ConfigDef("", 7, "A single broker: no replication to throttle."),
    "local.retention.bytes": ConfigDef("-2", 5, "No tiered storage: -2, the same as retention.bytes.",
                                       synonym="log.local.retention.bytes"),
    "local.retention.ms": ConfigDef("-2", 5, "No tiered storage: -2, the same as retention.ms.",
                                    synonym="log.local.retention.ms"),
    "remote.log.copy.disable": ConfigDef("false", 1, "No tiered storage."),
    "remote.log.delete.on.disable": ConfigDef("false", 1, "No tiered storage."),
    "remote.storage.enable": ConfigDef("false", 1, "No tiered storage: only false.", allowed=("false",)),
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
                                                  "under the subject <topic>-key.", allowed=("true", "false")),
    VALUE_SCHEMA_VALIDATION: ConfigDef("false", 1, "Refuse records whose value does not carry a schema id "
                                                    "registered under the subject <topic>-value.",
                                       allowed=("true", "false")),
    KEY_SUBJECT_STRATEGY: ConfigDef(_STRATEGY_PACKAGE + "TopicNameStrategy", 2,
                                    "The subject validated keys' schema ids are looked up under.",
                                    allowed=SUBJECT_STRATEGIES),
    VALUE_SUBJECT_STRATEGY: ConfigDef(_STRATEGY_PACKAGE + "TopicNameStrategy", 2,
                                      "The subject validated values' schema ids are looked up under.",
                                      allowed=SUBJECT_STRATEGIES),
}


def definition(name: str) -> ConfigDef:
    """A topic config's definition, Kafka's or an opt-in one."""
    return TOPIC_CONFIGS.get(name) or OPT_IN_CONFIGS[name]


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
        broker_name = definition.synonym
        if definition.cluster_default is not None:
            chain.append((name, definition.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG))
        elif name in inherited and inherited[name] != definition.default:
            chain.append((broker_name or name, inherited[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if broker_name is not None and not definition.synonym_unset:
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
        allowed = definition.allowed
        if allowed is not None and value not in allowed:
            raise InvalidConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        if definition.kind in (3, 5):
            try:
                int(value)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                         f"{'INT' if definition.kind == 3 else 'LONG'}") from None
        low = definition.at_least
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
