"""What the route modules share: the broker they serve, as the narrow view they read, and its application key.

The HTTP server is handed the broker process at construction (kafkacompat.kafka_port.server.BrokerServer
starts it) and reads only what `ServedBroker` names, so it does not import the process that starts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web

if TYPE_CHECKING:
    from ..broker.cluster import Cluster
    from ..config import BrokerConfig


class ServedBroker(Protocol):
    """The broker process as the HTTP server reads it: its configuration, its Cluster once the store is open,
    its Kafka connections (for /metrics) and its readiness (for /health/ready)."""

    @property
    def config(self) -> "BrokerConfig": ...

    @property
    def cluster(self) -> "Cluster | None": ...

    @property
    def connection_count(self) -> int: ...

    @property
    def connections_accepted(self) -> int: ...

    @property
    def connections_refused(self) -> int: ...

    def readiness(self) -> dict[str, bool]: ...


BROKER: web.AppKey[ServedBroker] = web.AppKey("broker")
