"""TLS for the SSL and SASL_SSL listeners, through Python's ssl module.

A server-side SSLProtocol is made per connection here (rather than by
create_server(ssl=...)) so that a failed handshake - garbage bytes, an
untrusted or expired client certificate, a client that stops half way and
runs into the timeout - closes that connection with one log line naming
the client and the reason; asyncio itself would drop it silently.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import sslproto
from typing import Protocol

from .principal import ANONYMOUS, user
from .principal_mapping import PrincipalMappingError, map_subject, parse_rules, subject_name

log = logging.getLogger(__name__)

CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsSettings(Protocol):
    """The listeners' certificate settings (kafkacompat.config.BrokerConfig has them; security sits below the
    configuration)."""

    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_key_password: str | None
    ssl_ca_location: str | None
    ssl_client_auth: str


class TlsSetupError(Exception):
    """The certificate, key or CA files cannot be used; the message names the setting and the file."""


def server_context(config: TlsSettings) -> ssl.SSLContext:
    """The TLS settings shared by every SSL/SASL_SSL listener (TLS 1.2 or newer)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    assert config.ssl_certificate_location and config.ssl_key_location  # parse_listeners checked
    try:
        context.load_cert_chain(config.ssl_certificate_location, config.ssl_key_location, config.ssl_key_password)
    except (OSError, ValueError) as exc:
        raise TlsSetupError(f"cannot load ssl_certificate_location {config.ssl_certificate_location} with "
                            f"ssl_key_location {config.ssl_key_location}: {_reason(exc)}") from None
    if config.ssl_ca_location:
        try:
            context.load_verify_locations(cafile=config.ssl_ca_location)
        except (OSError, ValueError) as exc:
            raise TlsSetupError(f"cannot load ssl_ca_location {config.ssl_ca_location}: {_reason(exc)}") from None
    context.verify_mode = CLIENT_AUTH_MODES[config.ssl_client_auth]
    return context


class CertificatePrincipals:
    """Principal of a TLS client: its certificate subject through ssl.principal.mapping.rules."""

    def __init__(self, rules: str) -> None:
        self._rules = parse_rules(rules)

    def principal(self, peercert: dict | None) -> str:
        """User:<mapped subject>, or User:ANONYMOUS without a client certificate.

        PrincipalMappingError when no rule applies: the client is refused.
        """
        if not peercert:
            return ANONYMOUS
        return user(map_subject(self._rules, subject_name(peercert)))


class TlsServerProtocol(sslproto.SSLProtocol):
    """asyncio's server-side TLS layer, with a log line when the handshake fails."""

    def __init__(self, app_protocol: asyncio.BaseProtocol, context: ssl.SSLContext, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        super().__init__(loop, app_protocol, context, waiter, server_side=True, ssl_handshake_timeout=timeout)
        self._peer = "?"
        waiter.add_done_callback(self._handshake_finished)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        super().connection_made(transport)

    def _handshake_finished(self, waiter: asyncio.Future[None]) -> None:
        if waiter.cancelled():
            return
        exc = waiter.exception()
        if exc is None and "ssl_object" in self._extra:
            return
        reason = _reason(exc) if exc is not None else "the client closed the connection"
        log.warning("closing connection from %s: TLS handshake failed: %s", self._peer, reason)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


__all__ = ["CertificatePrincipals", "PrincipalMappingError", "TlsServerProtocol", "TlsSetupError", "server_context"]
