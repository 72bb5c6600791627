"""Helpers the group handlers share: timeouts in ms and the client's address as Kafka shows it."""

from __future__ import annotations

import datetime
from typing import Any


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(ctx: Any) -> str:
    """"/127.0.0.1", as Kafka prints a member's InetAddress."""
    host = ctx.peer.rpartition(":")[0] or ctx.peer
    return "/" + host.strip("[]")
