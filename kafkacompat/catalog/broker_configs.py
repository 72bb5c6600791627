"""Broker configs under Kafka's names: what `kafka-configs --entity-type brokers` shows and changes.

Each Kafka name reads a BrokerConfig field (or a fact of this broker). Its
source follows Kafka's precedence: a dynamic per-broker value (entity name
"1"), then a dynamic cluster-wide default (entity name ""), then a static
value (config file, environment or flag: differs from the field's default),
then the default. The configs Kafka lets IncrementalAlterConfigs change and
this broker honours at once are dynamic here too; their values are kept in
the store's settings and applied again on start. Kafka's other dynamic
configs (kafka_broker_configs: SSL and SASL settings, thread counts, log
cleaner and log.* defaults...) are accepted, checked and kept as Kafka
keeps them, and shown once set, though nothing here reads them; Kafka's
static configs are refused as Kafka refuses them ("Cannot update these
configs dynamically"), and names Kafka does not know are kept, their values
hidden, as Kafka does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig
from . import kafka_broker_configs as kafka
from .topic_configs import DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, InvalidConfigError, Synonym

if TYPE_CHECKING:
    from .views import BrokerConfigSource

DYNAMIC_BROKER_CONFIG = 2
STATIC_BROKER_CONFIG = 4
BOOLEAN, STRING, INT, SHORT, LONG, LIST = 1, 2, 3, 4, 5, 7
_SETTING_PREFIX = "broker-config:"  # store settings: broker-config:<entity>:<name>


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    kind: int
    field: str | None = None  # the BrokerConfig field it reads (and sets, when dynamic); its default is the default
    dynamic: bool = False
    value: Callable[["BrokerConfigSource"], str] | None = None  # for names that are facts of this broker, not fields
    default: str | None = None  # Kafka's default of such a fact, listed as its DEFAULT_CONFIG synonym
    only_when_set: bool = False  # a dynamic-only config (not in Kafka's static config): listed only once set


def _listeners(cluster: "BrokerConfigSource") -> str:
    if cluster.listener_names:  # as bound (port 0: the one picked)
        return ",".join(cluster.listener_names)
    return f"PLAINTEXT://{cluster.config.host}:{cluster.config.port or cluster.port}"


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    "broker.id": BrokerConfigDef(INT, "node_id"),
    "node.id": BrokerConfigDef(INT, "node_id"),
    "process.roles": BrokerConfigDef(LIST, value=lambda c: "broker,controller"),
    "listeners": BrokerConfigDef(STRING, value=_listeners, default="PLAINTEXT://:9092"),
    "advertised.listeners": BrokerConfigDef(STRING, value=lambda c: f"PLAINTEXT://{c.host}:{c.port}"),
    "listener.security.protocol.map": BrokerConfigDef(STRING, value=lambda c: "PLAINTEXT:PLAINTEXT"),
    "log.dirs": BrokerConfigDef(STRING, value=lambda c: ",".join([c.config.data_dir, *c.config.volumes])),
    "auto.create.topics.enable": BrokerConfigDef(BOOLEAN, "auto_create_topics"),
    "delete.topic.enable": BrokerConfigDef(BOOLEAN, value=lambda c: "true", default="true"),
    "num.partitions": BrokerConfigDef(INT, value=lambda c: _default_partitions(c), default="1"),
    "default.replication.factor": BrokerConfigDef(INT, value=lambda c: "1", default="1"),
    "min.insync.replicas": BrokerConfigDef(INT, value=lambda c: "1", default="1"),
    "offsets.topic.replication.factor": BrokerConfigDef(SHORT, value=lambda c: "1", default="3"),
    "group.share.min.record.lock.duration.ms": BrokerConfigDef(INT, "group_share_min_record_lock_duration_ms"),
    "group.share.max.record.lock.duration.ms": BrokerConfigDef(INT, "group_share_max_record_lock_duration_ms"),
    # what a group's own configs default to and are bounded by (catalog/group_configs.py)
    **{name: BrokerConfigDef(INT, name.replace(".", "_")) for name in (
        f"group.{kind}.{bound}{timer}" for kind in ("consumer", "share", "streams")
        for bound in ("", "min.", "max.") for timer in ("session.timeout.ms", "heartbeat.interval.ms"))},
    "group.share.record.lock.duration.ms": BrokerConfigDef(INT, "group_share_record_lock_duration_ms"),
    "group.streams.num.standby.replicas": BrokerConfigDef(INT, "group_streams_num_standby_replicas"),
    "group.streams.max.standby.replicas": BrokerConfigDef(INT, "group_streams_max_standby_replicas"),
    "offsets.topic.num.partitions": BrokerConfigDef(INT, "offsets_topic_num_partitions"),
    "offsets.retention.minutes": BrokerConfigDef(INT, "offsets_retention_minutes"),
    "offsets.retention.check.interval.ms": BrokerConfigDef(LONG, "offsets_retention_check_interval_ms"),
    "offset.metadata.max.bytes": BrokerConfigDef(INT, "offset_metadata_max_bytes"),
    "group.initial.rebalance.delay.ms": BrokerConfigDef(INT, "group_initial_rebalance_delay_ms"),
    "group.min.session.timeout.ms": BrokerConfigDef(INT, "group_min_session_timeout_ms"),
    "group.max.session.timeout.ms": BrokerConfigDef(INT, "group_max_session_timeout_ms"),
    "group.max.size": BrokerConfigDef(INT, "group_max_size"),
    "socket.request.max.bytes": BrokerConfigDef(INT, "socket_request_max_bytes"),
    "message.max.bytes": BrokerConfigDef(INT, "message_max_bytes"),
    "max.connections.per.ip": BrokerConfigDef(INT, "max_connections_per_ip"),
    "connections.max.idle.ms": BrokerConfigDef(LONG, "connections_max_idle_ms"),
    "queued.max.request.bytes": BrokerConfigDef(LONG, "queued_max_request_bytes"),
    "max.connections": BrokerConfigDef(INT, "max_connections", dynamic=True),
    "producer.id.expiration.ms": BrokerConfigDef(INT, "producer_id_expiration_ms", dynamic=True),
    "log.retention.check.interval.ms": BrokerConfigDef(LONG, "retention_check_ms"),
    "transaction.max.timeout.ms": BrokerConfigDef(INT, "transaction_max_timeout_ms"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": BrokerConfigDef(
        INT, "transaction_abort_timed_out_transaction_cleanup_interval_ms"),
    "transactional.id.expiration.ms": BrokerConfigDef(INT, "transactional_id_expiration_ms"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": BrokerConfigDef(
        INT, "transaction_remove_expired_transaction_cleanup_interval_ms"),
    "delegation.token.max.lifetime.ms": BrokerConfigDef(LONG, "delegation_token_max_lifetime_ms"),
    "delegation.token.expiry.time.ms": BrokerConfigDef(LONG, "delegation_token_expiry_time_ms"),
    "delegation.token.expiry.check.interval.ms": BrokerConfigDef(LONG, "delegation_token_expiry_check_interval_ms"),
}

# Kafka's throttles of partition moves (kafka-reassign-partitions sets them and its --verify clears them).
# A single broker replicates nothing, so the two replication rates bound nothing here, as on a single-node
# Kafka; the log-dir one bounds the bytes a move between volumes copies per second (storage/disk/move.py).
# Kafka 4.1 lists them only once they are set.
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
_UNLIMITED = str(2**63 - 1)
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate", MOVE_RATE)
BROKER_CONFIGS.update({name: BrokerConfigDef(LONG, dynamic=True, only_when_set=True) for name in THROTTLES})


def _default_partitions(cluster: "BrokerConfigSource") -> str:
    stream = cluster.store.get_stream(cluster.default_stream)
    return str(stream.policy.default_partitions if stream else 1)


_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}


def _setting_key(entity: str, name: str) -> str:
    return f"{_SETTING_PREFIX}{entity}:{name}"


def dynamic_values(cluster: "BrokerConfigSource", entity: str) -> dict[str, str]:
    """The dynamic configs set for one entity: the broker id, or "" for the cluster-wide default."""
    prefix = _setting_key(entity, "")
    return {key[len(prefix):]: value for key, value in cluster.store.settings().items() if key.startswith(prefix)}


def _field_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe(cluster: "BrokerConfigSource") -> dict[str, tuple[str | None, int, list[Synonym]]]:
    """name -> (value, source, synonyms) for every broker config shown."""
    per_broker = dynamic_values(cluster, str(cluster.node_id))
    cluster_wide = dynamic_values(cluster, "")
    out: dict[str, tuple[str | None, int, list[Synonym]]] = {}
    for name, d in BROKER_CONFIGS.items():
        if d.only_when_set and name not in per_broker and name not in cluster_wide:
            continue
        chain: list[Synonym] = []
        if name in per_broker:
            chain.append((name, per_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in cluster_wide:
            chain.append((name, cluster_wide[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        static, default = _started_and_default(cluster, d) if not d.only_when_set else (None, None)
        if static is not None:
            chain.append((name, static, STATIC_BROKER_CONFIG))
        if default is not None:
            chain.append((name, default, DEFAULT_CONFIG))
        value, source = (chain[0][1], chain[0][2]) if chain else (None, DEFAULT_CONFIG)
        out[name] = (value, source, chain)
    for name in sorted((per_broker.keys() | cluster_wide.keys()) - BROKER_CONFIGS.keys()):  # kept, not honoured
        chain = [(name, shown_value(name, values[name]), source)
                 for values, source in ((per_broker, DYNAMIC_BROKER_CONFIG), (cluster_wide, DYNAMIC_DEFAULT_BROKER_CONFIG))
                 if name in values]
        out[name] = (chain[0][1], chain[0][2], chain)
    return out


def _started_and_default(cluster: "BrokerConfigSource", d: BrokerConfigDef) -> tuple[str | None, str | None]:
    """(the value this broker started with, if it is not the default; the default)."""
    if d.field is not None:
        default = _field_text(_FIELD_DEFAULTS[d.field])
        started = _field_text(cluster.started_config[d.field])
    else:
        assert d.value is not None
        default, started = d.default, d.value(cluster)
    return (None if started == default else started), default


def check_changes(changes: Mapping[str, str | None], entity: str = "1") -> None:
    """InvalidConfigError (bad values of the configs this broker honours) or RefusedError, as Kafka refuses them."""
    fixed = sorted(name for name in changes if (name in BROKER_CONFIGS and not BROKER_CONFIGS[name].dynamic)
                   or (name not in BROKER_CONFIGS and name in kafka.STATIC))
    if fixed:
        raise NotDynamicError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for name, value in changes.items():
        if name in BROKER_CONFIGS:
            _check_honoured(name, value)
        elif value is not None and name in kafka.DYNAMIC:
            _check_kafka_value(name, value)
    per_broker = sorted(name for name in changes if _per_broker_only(name))
    if entity == "" and per_broker:
        raise RefusedError("Cannot update these configs at default cluster level, broker id must be specified: "
                           f"Set({', '.join(per_broker)})")


def _check_honoured(name: str, value: str | None) -> None:
    if value is None:
        return
    least = 0 if name in THROTTLES else 1  # Kafka's throttles take 0 (nothing moves until it changes)
    try:
        if int(value) < least:
            raise ValueError
    except ValueError:
        kind = "a non-negative" if least == 0 else "a positive"
        raise InvalidConfigError(f"{name} must be {kind} integer, got {value!r}") from None


def _per_broker_only(name: str) -> bool:
    return name.startswith(kafka.LISTENER_PREFIX) or (name in kafka.DYNAMIC and kafka.DYNAMIC[name][2])


def _check_kafka_value(name: str, value: str) -> None:
    """Kafka's ConfigDef parse and validator of one of its dynamic broker configs, with Kafka's message."""
    kind, check, _ = kafka.DYNAMIC[name]

    def refuse(why: str, shown: str = value) -> RefusedError:
        return RefusedError(f"Invalid value {shown} for configuration {name}: {why}")

    if kind == kafka.CLASS:  # kafkacompat runs no Java: no class can be loaded
        raise refuse(f"Class {value} could not be found.")
    if kind == kafka.BOOLEAN and value.strip().lower() not in ("true", "false"):
        raise refuse("Expected value to be either true or false")
    number: float | None = None
    if kind in kafka.TYPE_NAMES:
        try:
            number = float(value) if kind == kafka.DOUBLE else int(value.strip())
        except ValueError:
            raise refuse(f"Not a number of type {kafka.TYPE_NAMES[kind]}") from None
    if isinstance(check, kafka.OneOf):
        items = [v.strip() for v in value.split(",")] if kind == kafka.LIST else [value.strip()]
        for item in items:
            if item and item not in check.values:  # a list names its first bad item, as Kafka's ValidList
                raise refuse(f"String must be one of: {', '.join(check.values)}", item if kind == kafka.LIST else value)
    elif isinstance(check, (kafka.AtLeast, kafka.Between)) and number is not None:
        if isinstance(check, kafka.Between) and number == check.also:
            return
        parsed = str(number)  # Kafka names the parsed value: 2.0 for a DOUBLE
        if number < check.low:
            raise refuse(f"Value must be at least {check.low}", parsed)
        if isinstance(check, kafka.Between) and number > check.high:
            raise refuse(f"Value must be no more than {check.high}", parsed)


def kind_of(name: str) -> int:
    """The config type DescribeConfigs shows for a broker config name (0: unknown to Kafka)."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name].kind
    return kafka.DYNAMIC[name][0] if name in kafka.DYNAMIC else 0


def shown_value(name: str, value: str | None) -> str | None:
    """A dynamic value as DescribeConfigs shows it: passwords and names Kafka does not know are hidden."""
    return None if kind_of(name) in (0, kafka.PASSWORD) else value


class RefusedError(ValueError):
    """A broker config change Kafka answers INVALID_REQUEST to."""


class NotDynamicError(RefusedError):
    """A broker config Kafka (and this broker) only read at start."""


async def set_dynamic(cluster: "BrokerConfigSource", entity: str, new: Mapping[str, str]) -> None:
    """Replace one entity's dynamic configs, keep them in the store and apply them."""
    old = dynamic_values(cluster, entity)
    changes: dict[str, str | None] = {_setting_key(entity, name): None for name in old if name not in new}
    changes.update({_setting_key(entity, name): value for name, value in new.items()})
    await cluster.store.set_settings(changes)
    apply_dynamic(cluster)


def apply_dynamic(cluster: "BrokerConfigSource") -> None:
    """Set every dynamic config's field to its effective value (per broker > cluster-wide > started)."""
    per_broker = dynamic_values(cluster, str(cluster.node_id))
    cluster_wide = dynamic_values(cluster, "")
    for name, d in BROKER_CONFIGS.items():
        if not d.dynamic or d.field is None:
            continue
        raw = per_broker.get(name, cluster_wide.get(name))
        value = int(raw) if raw is not None else cluster.started_config[d.field]
        setattr(cluster.config, d.field, value)
    rate = per_broker.get(MOVE_RATE, cluster_wide.get(MOVE_RATE))
    cluster.store.move_bytes_per_second = int(rate) if rate is not None and rate != _UNLIMITED else None
    cluster.producers.expiration_ms = cluster.config.producer_id_expiration_ms
