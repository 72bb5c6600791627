"""What the Kafka-protocol commands (produce, consume, group) share: one librdkafka configuration and errors.

These commands speak Kafka's own protocol, so they work against any Kafka
broker as well as kafkacompat, through confluent-kafka (librdkafka): the
client library with the most complete Admin API in Python (group listing
and description, committed offsets, offset reset, ListOffsets by time) and
every codec built in. It is imported only by these commands, so `serve`
and the stream commands never load it.
"""

from __future__ import annotations

from typing import Any

from ..security.client import ClientSecurity
from .client import connect, parse_bootstrap

REQUEST_TIMEOUT_S = 30.0  # how long one admin request or metadata lookup may take


class CommandError(Exception):
    """A refusal worth one line on stderr and exit status 1."""


def client_config(bootstrap: str, security: ClientSecurity | None = None, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for a short-lived command-line client.

    The broker is checked first with a plain TCP connect, so an unreachable
    address fails at once with the reason instead of librdkafka retrying in
    silence; librdkafka's own log stays quiet (errors reach us as results).
    """
    servers = parse_bootstrap(bootstrap)
    connect(servers, timeout=10.0).close()
    secure = security.librdkafka() if security is not None else {}  # --command-config
    return {"bootstrap.servers": bootstrap, "log_level": 0, "client.id": "kafkacompat-cli", **secure, **extra}


def describe_error(err: Any) -> str:
    """A KafkaError, or an exception (a KafkaException carries a KafkaError), as one line."""
    error = err.args[0] if isinstance(err, Exception) and err.args and hasattr(err.args[0], "name") else err
    if hasattr(error, "name") and hasattr(error, "str"):
        text = error.str()
        return f"{error.name()}: {text}" if text and text != error.name() else error.name()
    return str(error)

