"""Listeners as Kafka names them: NAME://HOST:PORT, each with a security protocol and an advertised address.

Without `listeners` the broker keeps its one PLAINTEXT listener on
--host/--port (advertised as --advertised-host/--advertised-port); with
`listeners` only those listed are opened, so a secure broker has no
forgotten plaintext port. Metadata, FindCoordinator and DescribeCluster
answer each client with the address of the listener it came in on.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Protocol

from .oauthbearer import MECHANISM as OAUTHBEARER
from .principal_mapping import PrincipalMappingError, parse_rules
from .scram import MECHANISMS as SCRAM_MECHANISMS


class ListenerSettings(Protocol):
    """The broker settings the listeners are made from (kafkacompat.config.BrokerConfig has them; this module
    is below the configuration, which checks them with parse_listeners)."""

    host: str
    port: int
    advertised_host: str | None
    advertised_port: int | None
    listeners: list[str]
    advertised_listeners: list[str]
    listener_security_protocol_map: list[str]
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_ca_location: str | None
    ssl_client_auth: str
    ssl_principal_mapping_rules: str
    sasl_enabled_mechanisms: list[str]


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)
CLIENT_AUTH = ("none", "requested", "required")
_ADDRESS = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:/]*)):(?P<port>\d+)$")


class ListenerError(ValueError):
    """A listener setting that cannot be served; the message names the setting and the fix."""


@dataclasses.dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str  # address bound ("0.0.0.0" for all)
    port: int  # 0 picks a free port
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def advertised(self, bound_port: int) -> tuple[str, int]:
        """What clients are told: the advertised address, else the bound one (localhost for a wildcard)."""
        host = self.advertised_host or ("localhost" if self.host in ("0.0.0.0", "::", "") else self.host)
        return host, self.advertised_port or bound_port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


DEFAULT_LISTENER = Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092)


def _split(text: str, setting: str) -> tuple[str, str, int]:
    match = _ADDRESS.match(text.strip())
    if not match:
        raise ListenerError(f"{setting}: {text!r} is not NAME://HOST:PORT (e.g. SASL_SSL://0.0.0.0:9093)")
    port = int(match["port"])
    if port > 65535:
        raise ListenerError(f"{setting}: {text!r}: {port} is not a TCP port")
    host = match["v6"] if match["v6"] is not None else match["host"]
    return match["name"].upper(), host, port


def _protocol_map(config: ListenerSettings) -> dict[str, str]:
    mapping = {p: p for p in PROTOCOLS}
    for entry in config.listener_security_protocol_map:
        name, _, protocol = entry.partition(":")
        if protocol.upper() not in PROTOCOLS:
            raise ListenerError(f"listener_security_protocol_map: {entry!r} is not NAME:PROTOCOL with PROTOCOL "
                                f"one of {', '.join(PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol.upper()
    return mapping


def parse_listeners(config: ListenerSettings) -> list[Listener]:
    """The listeners to open, checked against the TLS and SASL settings they need."""
    if not config.listeners:
        listeners = [Listener("PLAINTEXT", "PLAINTEXT", config.host, config.port,
                              config.advertised_host, config.advertised_port)]
    else:
        mapping = _protocol_map(config)
        advertised: dict[str, tuple[str, int]] = {}
        for entry in config.advertised_listeners:
            name, host, port = _split(entry, "advertised_listeners")
            advertised[name] = (host, port)
        listeners = []
        for entry in config.listeners:
            name, host, port = _split(entry, "listeners")
            if name not in mapping:
                raise ListenerError(f"listeners: {entry!r}: no security protocol for listener {name}; name it "
                                    f"{', '.join(PROTOCOLS)} or map it with listener_security_protocol_map")
            if any(existing.name == name for existing in listeners):
                raise ListenerError(f"listeners: listener name {name} appears twice")
            ad_host, ad_port = advertised.pop(name, (None, None))
            listeners.append(Listener(name, mapping[name], host or "0.0.0.0", port, ad_host or None, ad_port))
        if advertised:
            raise ListenerError(f"advertised_listeners: {', '.join(sorted(advertised))} is not in listeners")
    _check_security(config, listeners)
    return listeners


def _check_security(config: ListenerSettings, listeners: list[Listener]) -> None:
    if config.ssl_client_auth not in CLIENT_AUTH:
        raise ListenerError(f"ssl_client_auth must be one of {', '.join(CLIENT_AUTH)}, got {config.ssl_client_auth!r}")
    unknown = [m for m in config.sasl_enabled_mechanisms if m not in SASL_MECHANISMS]
    if unknown:
        raise ListenerError(f"sasl_enabled_mechanisms: {', '.join(unknown)} not supported (this broker offers "
                            f"{', '.join(SASL_MECHANISMS)})")
    try:
        parse_rules(config.ssl_principal_mapping_rules)
    except PrincipalMappingError as exc:
        raise ListenerError(f"ssl_principal_mapping_rules: {exc}") from None
    tls = [str(listener) for listener in listeners if listener.tls]
    if tls and not (config.ssl_certificate_location and config.ssl_key_location):
        raise ListenerError(f"listener {tls[0]} needs ssl_certificate_location and ssl_key_location (PEM files)")
    if tls and config.ssl_client_auth != "none" and not config.ssl_ca_location:
        raise ListenerError(f"ssl_client_auth={config.ssl_client_auth} needs ssl_ca_location (the CA that signs "
                            "client certificates)")
    if any(listener.sasl for listener in listeners) and not config.sasl_enabled_mechanisms:
        raise ListenerError("a SASL listener needs at least one of sasl_enabled_mechanisms")
