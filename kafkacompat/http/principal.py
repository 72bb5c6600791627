"""Who an HTTP request acts as: the Kafka principal REST calls and console forms are authorized as.

With `http_authentication = "none"` (the default) every request is
User:ANONYMOUS, which is why the server binds to loopback by default. With
"basic", every request but the health probes must carry HTTP Basic
credentials of a SCRAM user (`kafkacompat user add`, kafka-configs.sh
--entity-type users): the password is checked against the stored SCRAM
credential as SASL/PLAIN checks it, and the request acts as User:<name>, so
the Kafka listeners' ACLs and stream permissions apply to it unchanged
(a verified login is remembered, see login_cache, so PBKDF2 runs once). A
refusal answers 401 with a WWW-Authenticate challenge and Confluent's
error JSON, and writes one audit line (never the password). With "mtls"
the server (HTTPS, http_tls) requires a client certificate signed by
ssl_ca_location, and the request acts as the principal its subject maps to
through ssl_principal_mapping_rules, as on an SSL listener. With
"oauthbearer" a request carries `Authorization: Bearer <JWT>`, checked by the
validator of the OAUTHBEARER mechanism (sasl_oauthbearer_* settings), and
acts as User:<sub>.

A middleware records the principal and peer of the request being served
in context variables, so the Kafka calls made on its behalf
(kafka_calls.call) carry them, and so do tasks it starts (a consumer
instance's membership inherits its creator's).
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import logging
from typing import Any

from aiohttp import web

from ..security.oauthbearer import InvalidBearerToken, claimed_subject
from ..security.principal_mapping import PrincipalMappingError
from ..security.scram import AuthenticationFailed
from ..security.tls import CertificatePrincipals
from .common import BROKER
from .login_cache import LoginCache

ANONYMOUS = "User:ANONYMOUS"
UNAUTHENTICATED_PATHS = ("/health/",)  # orchestrators' probes carry no credentials
_PRINCIPAL: web.RequestKey[str] = web.RequestKey("principal", str)
LOGINS: web.AppKey[LoginCache] = web.AppKey("logins", LoginCache)
_principal: contextvars.ContextVar[str] = contextvars.ContextVar("rest_principal", default=ANONYMOUS)
_peer: contextvars.ContextVar[str] = contextvars.ContextVar("rest_peer", default="rest-proxy")
audit = logging.getLogger("kafkacompat.audit")


def principal_of(request: web.Request) -> str:
    """The Kafka principal ("User:name") this HTTP request acts as."""
    return request.get(_PRINCIPAL, ANONYMOUS)


def current_principal() -> str:
    """The principal of the HTTP request being served (ANONYMOUS outside one)."""
    return _principal.get()


def current_peer() -> str:
    """The HTTP client being served, as Kafka request contexts name a peer ("host:port via REST")."""
    return _peer.get()


_BASIC = 'Basic realm="kafkacompat", charset="UTF-8"'
CHALLENGES = {"BASIC": _BASIC, "MTLS": _BASIC, "OAUTHBEARER": 'Bearer realm="kafkacompat", error="invalid_token"'}


def _unauthorized(request: web.Request, peer: str, reason: str, mechanism: str = "BASIC") -> web.Response:
    audit.warning("authentication failed: client=%s listener=HTTP mechanism=%s path=%s: %s",
                  peer, mechanism, request.path, reason)
    return web.json_response({"error_code": 40101, "message": "Unauthorized"}, status=401,
                             headers={"WWW-Authenticate": CHALLENGES[mechanism]})


async def _basic_login(request: web.Request, peer: str) -> str | web.Response:
    """User:<name> for valid Basic credentials, else the 401 answer."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return _unauthorized(request, peer, "no Basic credentials")
    try:
        username, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return _unauthorized(request, peer, "malformed Basic credentials")
    if not sep:
        return _unauthorized(request, peer, "malformed Basic credentials")
    cluster = request.app[BROKER].cluster
    try:
        return "User:" + await request.app[LOGINS].verify(username, password, cluster.credentials.lookup)
    except AuthenticationFailed as exc:
        return _unauthorized(request, peer, f"user {username!r}: {exc}")


async def _bearer_login(request: web.Request, peer: str) -> str | web.Response:
    """User:<sub> for a valid `Authorization: Bearer <JWT>`, else the 401 answer."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    cluster = request.app[BROKER].cluster
    validator = cluster.oauth if cluster is not None else None  # None: not started yet, or no JWKS set
    if scheme.lower() != "bearer" or not token.strip() or validator is None:
        return _unauthorized(request, peer, "no Bearer token", "OAUTHBEARER")
    try:
        return "User:" + (await validator.validate(token.strip())).principal_name
    except InvalidBearerToken as exc:
        claimed = claimed_subject(token.strip(), request.app[BROKER].config.sasl_oauthbearer_sub_claim_name)
        return _unauthorized(request, peer, f"{exc} (the token claims {claimed!r})" if claimed else str(exc),
                             "OAUTHBEARER")


def _certificate_login(request: web.Request, peer: str) -> str | web.Response:
    """The principal the client certificate's subject maps to (the TLS layer already checked the chain)."""
    certificate = request.transport.get_extra_info("peercert") if request.transport is not None else None
    rules = request.app[BROKER].config.ssl_principal_mapping_rules
    try:
        principal = CertificatePrincipals(rules).principal(certificate)
    except PrincipalMappingError as exc:
        return _unauthorized(request, peer, f"certificate subject not mapped: {exc}", "MTLS")
    if principal == ANONYMOUS:
        return _unauthorized(request, peer, "no client certificate", "MTLS")
    return principal


@web.middleware
async def identify(request: web.Request, handler: Any) -> web.StreamResponse:
    address = request.transport.get_extra_info("peername") if request.transport is not None else None
    peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "unknown"
    principal = ANONYMOUS
    method = request.app[BROKER].config.http_authentication
    if method != "none" and not request.path.startswith(UNAUTHENTICATED_PATHS):
        if method == "basic":
            login = await _basic_login(request, peer)
        elif method == "oauthbearer":
            login = await _bearer_login(request, peer)
        else:
            login = _certificate_login(request, peer)
        if isinstance(login, web.Response):
            return login
        principal = login
    request[_PRINCIPAL] = principal
    _principal.set(principal)
    _peer.set(f"{peer} via REST")
    return await handler(request)


def add_routes(app: web.Application) -> None:
    app[LOGINS] = LoginCache()
    app.middlewares.append(identify)
