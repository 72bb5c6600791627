"""Group configs (ConfigResource GROUP, Kafka 4.x): per-group overrides of the broker's group settings.

`kafka-configs --entity-type groups` describes the ten configs Kafka 4.1
lists, each defaulting to the broker's group.<name>, and sets or deletes a
group's own values, which are kept in the store's settings (as Kafka keeps
them in its metadata log), whether or not the group exists yet. The
share.* values are read by the share group manager and the streams.* ones
by the Streams group coordinator (through `group_values`).
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

# name -> (Kafka's default, config type, inclusive range for ints or allowed values for strings)
GROUP_CONFIGS: dict[str, tuple[str, int, tuple[int, int] | tuple[str, ...]]] = {
    "consumer.session.timeout.ms": ("45000", INT, (45000, 60000)),
    "consumer.heartbeat.interval.ms": ("5000", INT, (5000, 15000)),
    "share.session.timeout.ms": ("45000", INT, (45000, 60000)),
    "share.heartbeat.interval.ms": ("5000", INT, (5000, 15000)),
    "share.record.lock.duration.ms": ("30000", INT, (15000, 60000)),
    "share.auto.offset.reset": ("latest", STRING, ("latest", "earliest")),
    "share.isolation.level": ("read_uncommitted", STRING, ("read_uncommitted", "read_committed")),
    "streams.session.timeout.ms": ("45000", INT, (45000, 60000)),
    "streams.heartbeat.interval.ms": ("5000", INT, (5000, 15000)),
    "streams.num.standby.replicas": ("0", INT, (0, 2)),
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


def group_config(cluster: "ConfigSource", group: str, name: str) -> int | str:
    """A group's effective value of one config (its own, else Kafka's default)."""
    default, kind, _ = GROUP_CONFIGS[name]
    value = group_values(cluster, group).get(name, default)
    return int(value) if kind == INT else value


def describe(cluster: "ConfigSource", group: str) -> dict[str, tuple[str, int, list[Synonym]]]:
    own = group_values(cluster, group)
    out: dict[str, tuple[str, int, list[Synonym]]] = {}
    for name, (default, _kind, _allowed) in GROUP_CONFIGS.items():
        if name in own:
            out[name] = (own[name], DYNAMIC_GROUP_CONFIG, [(name, own[name], DYNAMIC_GROUP_CONFIG)])
        else:
            out[name] = (default, DEFAULT_CONFIG, [(name, default, DEFAULT_CONFIG)])
    return out


def _bounds(name: str, config: "BrokerConfig") -> tuple[int, str, int, str]:
    """(low, the broker config naming it, high, its broker config): Kafka bounds each group config by the
    broker's group.<kind>.min.<rest> and group.<kind>.max.<rest>."""
    kind, rest = name.split(".", 1)
    low_name, high_name = f"group.{kind}.min.{rest}", f"group.{kind}.max.{rest}"
    low, high = GROUP_CONFIGS[name][2]
    low = getattr(config, low_name.replace(".", "_"), low)
    high = getattr(config, high_name.replace(".", "_"), high)
    return int(low), low_name, int(high), high_name


def check(new: Mapping[str, str], config: "BrokerConfig") -> None:
    """InvalidConfigError for unknown names or values outside Kafka's bounds (the broker's, where it has them)."""
    for name, value in new.items():
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        _default, kind, allowed = GROUP_CONFIGS[name]
        if kind == INT:
            try:
                number = int(value)
            except ValueError:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
            if name == "streams.num.standby.replicas":
                low, high = allowed
                if not low <= number <= high:
                    raise InvalidConfigError(f"Invalid value {value} for configuration {name}: must be in [{low}, {high}]")
                continue
            low, low_name, high, high_name = _bounds(name, config)
            if number < low:
                raise InvalidConfigError(f"{name} must be greater than or equal to {low_name}")
            if number > high:
                raise InvalidConfigError(f"{name} must be less than or equal to {high_name}")
        elif value not in allowed:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: one of {', '.join(map(str, allowed))}")


async def set_group_values(cluster: "ConfigSource", group: str, new: Mapping[str, str]) -> None:
    """Replace a group's own configs in the store."""
    old = group_values(cluster, group)
    changes: dict[str, str | None] = {_key(group, name): None for name in old if name not in new}
    changes.update({_key(group, name): value for name, value in new.items()})
    await cluster.store.set_settings(changes)
