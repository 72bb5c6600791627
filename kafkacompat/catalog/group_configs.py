"""Group configs (ConfigResource GROUP, Kafka 4.x): per-group overrides of the broker's group settings.

`kafka-configs --entity-type groups` describes the ten configs Kafka 4.1
lists, each defaulting to the broker's group.<name>, and sets or deletes a
group's own values, which are kept in the store's settings (as Kafka keeps
them in its metadata log), whether or not the group exists yet. The
coordinators read a group's effective values through `group_config` (its
own, else the broker's): consumer.* by the KIP-848 consumer group
coordinator, share.* by the share group manager, streams.* by the Streams
group coordinator; each heartbeat reads them, so a change applies at the
members' next heartbeat (and a session timeout at its next renewal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .topic_configs import DEFAULT_CONFIG, InvalidConfigError, Synonym

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from .views import ConfigSource

DYNAMIC_GROUP_CONFIG = 8
INT, STRING = 3, 2
_SETTING_PREFIX = "group-config:"  # store settings: group-config:<group>:<name>

# name -> (Kafka's default, config type, allowed values of strings); ints are bounded by the broker (see check)
GROUP_CONFIGS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "consumer.session.timeout.ms": ("45000", INT, ()),
    "consumer.heartbeat.interval.ms": ("5000", INT, ()),
    "share.session.timeout.ms": ("45000", INT, ()),
    "share.heartbeat.interval.ms": ("5000", INT, ()),
    "share.record.lock.duration.ms": ("30000", INT, ()),
    "share.auto.offset.reset": ("latest", STRING, ("latest", "earliest")),
    "share.isolation.level": ("read_uncommitted", STRING, ("read_committed", "read_uncommitted")),
    "streams.session.timeout.ms": ("45000", INT, ()),
    "streams.heartbeat.interval.ms": ("5000", INT, ()),
    "streams.num.standby.replicas": ("0", INT, ()),
}


def _key(group: str, name: str) -> str:
    return f"{_SETTING_PREFIX}{group}:{name}"


def group_values(cluster: "ConfigSource", group: str) -> dict[str, str]:
    """A group's own configs (without defaults)."""
    prefix = _key(group, "")
    return {
        key[len(prefix):]: value for key, value in cluster.store.settings().items()
        if key.startswith(prefix) and ":" not in key[len(prefix):]  # not a group named "<group>:..."
    }


def groups_with_configs(cluster: "ConfigSource") -> list[str]:
    """Groups that have configs of their own (ListConfigResources lists them)."""
    groups = {key[len(_SETTING_PREFIX):].rsplit(":", 1)[0] for key in cluster.store.settings() if key.startswith(_SETTING_PREFIX)}
    return sorted(groups)


def broker_default(name: str, config: "BrokerConfig") -> str:
    """The broker's group.<name> (Kafka's default where the broker has no such config)."""
    value = getattr(config, "group_" + name.replace(".", "_"), None)
    return GROUP_CONFIGS[name][0] if value is None else str(value)


def group_config(cluster: "ConfigSource", group: str, name: str) -> str:
    """A group's effective value of one config: its own, else the broker's, as Kafka's GroupConfigManager."""
    own = group_values(cluster, group).get(name)
    return own if own is not None else broker_default(name, cluster.config)


def group_int(cluster: "ConfigSource", group: str, name: str) -> int:
    """A group's effective value of an int config (what its coordinator applies)."""
    return int(group_config(cluster, group, name))


def describe(cluster: "ConfigSource", group: str) -> dict[str, tuple[str, int, list[Synonym]]]:
    own = group_values(cluster, group)
    out: dict[str, tuple[str, int, list[Synonym]]] = {}
    for name in GROUP_CONFIGS:
        if name in own:
            out[name] = (own[name], DYNAMIC_GROUP_CONFIG, [(name, own[name], DYNAMIC_GROUP_CONFIG)])
        else:
            default = broker_default(name, cluster.config)
            out[name] = (default, DEFAULT_CONFIG, [(name, default, DEFAULT_CONFIG)])
    return out


# Kafka's GroupConfig.validateValues: each bounded int within the broker's group.<kind>.min/max.<rest>, in this
# order; streams.num.standby.replicas at most group.streams.max.standby.replicas; each session timeout above its
# heartbeat interval (names left unset count with Kafka's defaults, as there)
_BOUNDED = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.heartbeat.interval.ms",
            "share.session.timeout.ms", "share.record.lock.duration.ms", "streams.heartbeat.interval.ms",
            "streams.session.timeout.ms")
_AT_LEAST = {"share.record.lock.duration.ms": 1000, "streams.num.standby.replicas": 0}  # ConfigDef ranges; others 1


def _bounds(name: str, config: "BrokerConfig") -> tuple[int, str, int, str]:
    """(low, the broker config naming it, high, its broker config)."""
    kind, rest = name.split(".", 1)
    low_name, high_name = f"group.{kind}.min.{rest}", f"group.{kind}.max.{rest}"
    low = getattr(config, low_name.replace(".", "_"))
    high = getattr(config, high_name.replace(".", "_"))
    return int(low), low_name, int(high), high_name


def _parsed(new: Mapping[str, str]) -> dict[str, int | str]:
    """Every group config's value (Kafka's default when unset), as Kafka's ConfigDef parses them."""
    values: dict[str, int | str] = {}
    for name, value in new.items():
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    for name, (default, kind, allowed) in GROUP_CONFIGS.items():
        value = new.get(name, default)
        if kind != INT:
            if value not in allowed:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: {_refusal(name, value, allowed)}")
            values[name] = value
            continue
        try:
            number = int(value)
        except ValueError:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
        least = _AT_LEAST.get(name, 1)
        if number < least:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {least}")
        values[name] = number
    return values


def _refusal(name: str, value: str, allowed: tuple[str, ...]) -> str:
    """Why a string value is refused: Kafka's words (its validator for share.auto.offset.reset has its own)."""
    if name != "share.auto.offset.reset":
        return f"String must be one of: {', '.join(allowed)}"
    if value.startswith("by_duration:"):
        return "by_duration is not served by kafkacompat: earliest or latest"
    return (f"Invalid value `{value}` for configuration {name}. The value must be either 'earliest', 'latest' "
            "or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def check(new: Mapping[str, str], config: "BrokerConfig") -> None:
    """InvalidConfigError, in Kafka's words and order, unless a group's new configs are valid on this broker."""
    values = _parsed(new)
    for name in _BOUNDED:
        low, low_name, high, high_name = _bounds(name, config)
        if int(values[name]) < low:
            raise InvalidConfigError(f"{name} must be greater than or equal to {low_name}")
        if int(values[name]) > high:
            raise InvalidConfigError(f"{name} must be less than or equal to {high_name}")
    if int(values["streams.num.standby.replicas"]) > config.group_streams_max_standby_replicas:
        raise InvalidConfigError("streams.num.standby.replicas must be less than or equal to "
                                 "group.streams.max.standby.replicas")
    for kind in ("consumer", "share", "streams"):
        if int(values[f"{kind}.session.timeout.ms"]) <= int(values[f"{kind}.heartbeat.interval.ms"]):
            raise InvalidConfigError(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


async def set_group_values(cluster: "ConfigSource", group: str, new: Mapping[str, str]) -> None:
    """Replace a group's own configs in the store."""
    old = group_values(cluster, group)
    changes: dict[str, str | None] = {_key(group, name): None for name in old if name not in new}
    changes.update({_key(group, name): value for name, value in new.items()})
    await cluster.store.set_settings(changes)
