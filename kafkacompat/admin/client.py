"""A blocking client for the broker's private admin API, over a plain socket.

The command line needs one request and one answer per invocation, so this
is deliberately small: connect, send, read, close. No Kafka client library.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
from typing import Any

from kafkacompat.protocol.admin_api import AdminMessageError, decode_response, encode_request

from ..frames import ImpossibleSize, PeerClosed, read_frame
from ..security.client import ClientSecurity
from ..security.scram import AuthenticationFailed

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_VARIABLE = "KAFKACOMPAT_BOOTSTRAP_SERVERS"
_MAX_RESPONSE = 256 * 1024 * 1024


class AdminError(Exception):
    """The broker refused the request; `code` is the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class BrokerUnreachable(Exception):
    """No broker answered at the bootstrap address."""


class LoginRefused(BrokerUnreachable):
    """The broker answered and refused the login (wrong password, unknown user): another server would too."""


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """host:port[,host:port...] (IPv6 as [addr]:port); ValueError says what is wrong."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def default_bootstrap() -> str:
    """The client commands' --bootstrap-server when none is given: $KAFKACOMPAT_BOOTSTRAP_SERVERS, else localhost."""
    return os.environ.get(BOOTSTRAP_VARIABLE) or DEFAULT_BOOTSTRAP


def connect(servers: list[tuple[str, int]], timeout: float, security: ClientSecurity | None = None) -> socket.socket:
    """A connection to the first bootstrap server that answers; BrokerUnreachable names why each failed.

    With `security` (--command-config) the connection is TLS and/or SASL as it says.
    """
    problems = []
    for host, port in servers:
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc}")
            continue
        if security is None:
            return sock
        try:
            return security.wrap(sock, host, timeout)
        except AuthenticationFailed as exc:
            sock.close()
            raise LoginRefused(f"authentication failed at {host}:{port}: {exc}") from None
        except OSError as exc:
            sock.close()
            problems.append(f"{host}:{port}: {exc}")
    raise BrokerUnreachable("cannot reach a broker (" + "; ".join(problems) + ")")


class AdminClient:
    def __init__(self, bootstrap: str | None = None, timeout: float = 60.0,
                 security: ClientSecurity | None = None) -> None:
        self.servers = parse_bootstrap(bootstrap or default_bootstrap())
        self.security = security
        self.timeout = timeout
        self._ids = itertools.count(1)

    def call(self, op: str, **args: Any) -> Any:
        """Run one operation; its result, or AdminError / BrokerUnreachable."""
        body = {"op": op, **{k: v for k, v in args.items() if v is not None}}
        correlation_id = next(self._ids)
        with connect(self.servers, self.timeout, self.security) as sock:
            address = sock.getpeername()[:2]
            sock.sendall(encode_request(correlation_id, body))
            try:
                frame = self._read_frame(sock)
            except PeerClosed:
                raise BrokerUnreachable(self._why_closed(address)) from None
        try:
            got_id, reply = decode_response(frame)
        except AdminMessageError as exc:
            raise BrokerUnreachable(f"the broker sent an unreadable answer: {exc}") from None
        if got_id != correlation_id:
            raise BrokerUnreachable(f"the broker answered request {got_id}, not {correlation_id}")
        if reply.error_code != 0:
            raise AdminError(reply.error_code, reply.error or f"error code {reply.error_code}")
        return reply.result

    def _read_frame(self, sock: socket.socket) -> bytes:
        try:
            return read_frame(sock, _MAX_RESPONSE)
        except TimeoutError:
            raise BrokerUnreachable(f"the broker did not answer within {self.timeout:g}s") from None
        except ImpossibleSize as exc:
            raise BrokerUnreachable(f"the broker sent {exc}") from None

    def _why_closed(self, address: tuple[str, int]) -> str:
        """Why the broker hung up on a request: a TLS listener reached without TLS, else an unknown request."""
        host, port = address
        tls = self.security is not None and self.security.protocol in ("SSL", "SASL_SSL")
        if not tls and _speaks_tls(host, port, self.timeout):
            return (f"{host}:{port} expects TLS: set security.protocol=SSL (or SASL_SSL) in the --command-config "
                    "file")
        return "the broker closed the connection (is it a kafkacompat broker, and as new as this CLI?)"


def _speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether host:port completes a TLS handshake (its certificate is not checked: this only tells the cause)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False
