"""What the route modules share: the application key of the broker they serve."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from ..kafka_port.server import BrokerServer

BROKER: web.AppKey["BrokerServer"] = web.AppKey("broker")
