"""What the catalog reads of the running broker, as narrow typed views the composition root satisfies.

Why: the configs here describe and set values kept in the store's settings and the broker's configuration;
taking the whole `Cluster` for that made the catalog import the composition root above it (an import circle
through every service). `kafkacompat.broker.cluster.Cluster` has each of these attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kafkacompat.storage import Store

    from ..config import BrokerConfig
    from .producer_state import ProducerStates


class ConfigSource(Protocol):
    """The store (settings, streams) and the broker's configuration: what topic and group configs read."""

    @property
    def store(self) -> "Store": ...

    @property
    def config(self) -> "BrokerConfig": ...


class BrokerConfigSource(ConfigSource, Protocol):
    """A broker's own facts besides: what its dynamic broker configs describe and apply."""

    @property
    def node_id(self) -> int: ...

    @property
    def port(self) -> int: ...

    @property
    def listener_names(self) -> list[str]: ...

    @property
    def default_stream(self) -> str: ...

    @property
    def started_config(self) -> dict[str, Any]: ...

    @property
    def producers(self) -> "ProducerStates": ...
