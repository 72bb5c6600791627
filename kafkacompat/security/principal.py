"""Kafka principals as strings: "User:ANONYMOUS" until a client authenticates."""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"
# a worker of `serve --workers N` asking another over its Unix socket (workers/channel.py): the broker itself,
# a super user. No login gives it: SASL, certificates and delegation tokens give User: principals
WORKER = "Broker:kafkacompat-worker"


def user(name: str) -> str:
    """The principal of an authenticated user name (SASL), as Kafka's KafkaPrincipal prints it."""
    return f"User:{name}"
