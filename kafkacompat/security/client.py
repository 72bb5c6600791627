"""Client security settings for the command-line tools: `--command-config FILE`, as Kafka's tools take it.

The file holds Kafka client properties (Java's names, as for kafka-topics.sh:
security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location
with ssl.truststore.type=PEM, ...) or librdkafka's (sasl.username,
ssl.ca.location, ...). The produce, consume and group commands hand them to
librdkafka; the stream and topic commands, which speak the broker's own admin
API, open TLS and log in with SASL (PLAIN, SCRAM) themselves. The broker's
replica links read the same file (--replication-client-config) and log in
to the destination with the same code, over asyncio.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
import socket
import ssl
import struct
from collections.abc import Generator
from typing import Any

from kio.serial import entity_reader
from kio.static.constants import EntityType

from kafkacompat.protocol.messages import encode_body, request_header, request_schema
from kafkacompat.protocol.versions import schema

from ..frames import FrameError, read_frame
from .listeners import PROTOCOLS
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import AuthenticationFailed, ScramClient

CLIENT_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)  # what these tools log in with (not OAUTHBEARER: no token source)

_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# Java client property -> librdkafka property, where they differ
_JAVA_NAMES = {"ssl.truststore.location": "ssl.ca.location", "ssl.keystore.location": "ssl.certificate.location"}
_MAX_SASL_ANSWER = 1024 * 1024
_KNOWN = {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
          "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm"}


class SecurityConfigError(ValueError):
    """A --command-config the tools cannot use; the message names the property."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a command connects: librdkafka-named settings, checked."""

    settings: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)  # holds the password

    @property
    def protocol(self) -> str:
        return self.settings.get("security.protocol", "PLAINTEXT").upper()

    def librdkafka(self) -> dict[str, str]:
        return dict(self.settings)

    def wrap(self, sock: socket.socket, host: str, timeout: float) -> socket.socket:
        """TLS and SASL on a connected socket, as this configuration asks; AuthenticationFailed if refused."""
        if self.protocol in ("SSL", "SASL_SSL"):
            sock = self._tls_context().wrap_socket(sock, server_hostname=host)
        if self.protocol.startswith("SASL_"):
            _sasl_login(sock, self.settings.get("sasl.mechanism", "PLAIN").upper(),
                        self.settings.get("sasl.username", ""), self.settings.get("sasl.password", ""))
        return sock

    async def open_stream(self, host: str, port: int, timeout: float
                          ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An asyncio connection with TLS and SASL as this configuration asks (the broker's replica links);
        AuthenticationFailed if the login is refused, ssl.SSLError if the certificate is not trusted."""
        tls = self._tls_context() if self.protocol in ("SSL", "SASL_SSL") else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None), timeout)
        if self.protocol.startswith("SASL_"):
            try:
                await asyncio.wait_for(_sasl_login_async(
                    reader, writer, self.settings.get("sasl.mechanism", "PLAIN").upper(),
                    self.settings.get("sasl.username", ""), self.settings.get("sasl.password", "")), timeout)
            except BaseException:
                writer.close()
                raise
        return reader, writer

    def _tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.settings.get("ssl.ca.location"))
        if self.settings.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
            context.check_hostname = False
        if "ssl.certificate.location" in self.settings:
            context.load_cert_chain(self.settings["ssl.certificate.location"],
                                    self.settings.get("ssl.key.location"), self.settings.get("ssl.key.password"))
        return context


def parse_properties(text: str) -> dict[str, str]:
    """key=value lines (Java properties: # and ! comments, `key: value` too)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
        if match:
            out[match[1]] = match[2]
    return out


def client_security(properties: dict[str, str]) -> ClientSecurity:
    """Kafka or librdkafka client properties as checked librdkafka settings."""
    settings: dict[str, str] = {}
    for key, value in properties.items():
        if key == "sasl.jaas.config":
            fields = dict(_JAAS.findall(value))
            if "username" not in fields or "password" not in fields:
                raise SecurityConfigError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
            if fields.get("tokenauth", "").lower() == "true":
                raise SecurityConfigError("sasl.jaas.config tokenauth=\"true\": kafkacompat's own commands and "
                                          "replica links cannot log in with a delegation token; use a user's "
                                          "password")
            settings["sasl.username"], settings["sasl.password"] = fields["username"], fields["password"]
        elif key in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.upper() != "PEM":
                raise SecurityConfigError(f"{key}={value}: only PEM files can be read here; convert the store "
                                          "with keytool/openssl to PEM")
        elif key in _JAVA_NAMES:
            settings[_JAVA_NAMES[key]] = value
            if key == "ssl.keystore.location":  # a PEM keystore holds the key beside the certificate
                settings.setdefault("ssl.key.location", value)
        elif key in _KNOWN:
            settings[key] = value
        else:
            raise SecurityConfigError(f"unknown client property {key!r} (supported: security.protocol, "
                                      "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    settings["security.protocol"] = protocol
    if protocol.startswith("SASL_"):
        mechanism = settings.setdefault("sasl.mechanism", "PLAIN").upper()
        if mechanism not in CLIENT_MECHANISMS:
            raise SecurityConfigError(f"sasl.mechanism={mechanism} is not one of {', '.join(CLIENT_MECHANISMS)} "
                                      "(the kafkacompat commands and replica links log in with these)")
    if settings.get("ssl.endpoint.identification.algorithm") == "":
        settings["ssl.endpoint.identification.algorithm"] = "none"
    return ClientSecurity(settings)


def load_command_config(path: str, setting: str = "--command-config") -> ClientSecurity:
    """--command-config FILE (or the broker's SETTING of the same format); SecurityConfigError with one line
    when it cannot be used."""
    try:
        with open(path, encoding="utf-8") as fh:
            return client_security(parse_properties(fh.read()))
    except OSError as exc:
        raise SecurityConfigError(f"cannot read {setting} {path}: {exc.strerror or exc}") from None


def _encode_request(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """One size-prefixed request frame, under the tools' client id."""
    client_id = b"kafkacompat-cli"
    payload = request_header(api_key, version, correlation_id, client_id) + encode_body(body)
    return struct.pack(">i", len(payload)) + payload


def _decode_answer(api_key: int, version: int, frame: bytes) -> Any:
    answer, _ = entity_reader(schema(api_key, version, EntityType.response))(frame, 4)
    return answer


# (api key, version, request body) asked; the decoded answer sent back in
SaslStep = Generator[tuple[int, int, Any], Any, None]


def _sasl_conversation(mechanism: str, username: str, password: str) -> SaslStep:
    """SaslHandshake v1 then SaslAuthenticate v1 (non-flexible versions every Kafka 2.x+ broker serves).

    Without I/O, so the blocking tools and the asyncio replica links share one login.
    """
    handshake = yield 17, 1, request_schema(17, 1)(mechanism=mechanism)
    if handshake.error_code != 0:
        raise AuthenticationFailed(f"the broker does not offer SASL mechanism {mechanism} "
                                   f"(it offers {', '.join(handshake.mechanisms)})")

    def check(answer: Any) -> bytes:
        if answer.error_code != 0:
            raise AuthenticationFailed(answer.error_message or f"SASL error code {answer.error_code}")
        return bytes(answer.auth_bytes)

    def authenticate(token: bytes) -> tuple[int, int, Any]:
        return 36, 1, request_schema(36, 1)(auth_bytes=token)

    if mechanism == "PLAIN":
        check((yield authenticate(f"\0{username}\0{password}".encode())))
        return
    assert mechanism in SCRAM_MECHANISMS
    client = ScramClient(mechanism, username, password)
    server_first = check((yield authenticate(client.first())))
    server_final = check((yield authenticate(client.final(server_first))))
    if not client.verify(server_final):
        raise AuthenticationFailed("the broker's SCRAM signature is wrong: it does not know this user's credential")


def _sasl_login(sock: socket.socket, mechanism: str, username: str, password: str) -> None:
    """The SASL conversation over a blocking socket (the command-line tools)."""
    conversation = _sasl_conversation(mechanism, username, password)
    answer = None
    for correlation_id in itertools.count(1):
        try:
            api_key, version, body = conversation.send(answer)
        except StopIteration:
            return
        sock.sendall(_encode_request(api_key, version, correlation_id, body))
        try:
            frame = read_frame(sock)
        except FrameError:
            raise AuthenticationFailed("the broker closed the connection during SASL authentication") from None
        answer = _decode_answer(api_key, version, frame)


async def _sasl_login_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mechanism: str,
                            username: str, password: str) -> None:
    """The SASL conversation over asyncio streams (the broker's replica links)."""
    conversation = _sasl_conversation(mechanism, username, password)
    answer = None
    for correlation_id in itertools.count(1):
        try:
            api_key, version, body = conversation.send(answer)
        except StopIteration:
            return
        writer.write(_encode_request(api_key, version, correlation_id, body))
        try:
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            if not 0 <= size <= _MAX_SASL_ANSWER:
                raise AuthenticationFailed(f"the broker answered SASL authentication with a frame of size {size}")
            frame = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            raise AuthenticationFailed("the broker closed the connection during SASL authentication") from None
        answer = _decode_answer(api_key, version, frame)
