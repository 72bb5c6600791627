"""Kafka principals as strings: "User:ANONYMOUS" until a client authenticates."""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    """The principal of an authenticated user name (SASL), as Kafka's KafkaPrincipal prints it."""
    return f"User:{name}"
