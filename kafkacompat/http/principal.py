"""Who an HTTP request acts as: the Kafka principal REST calls and console forms are authorized as.

With `http_authentication = "none"` (the default) every request is
User:ANONYMOUS, which is why the server binds to loopback by default; on a
broker with an authorizer "none" means "basic" unless `http_open` serves
the port without logins on purpose (login_method). With
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

A middleware records the principal, peer and route of the request being
served in context variables, so the Kafka calls made on its behalf
(kafka_calls.call) carry them, and so do tasks it starts (a consumer
instance's membership inherits its creator's). Whatever the HTTP server
decides itself (console pages, the live tail, /metrics) it asks the same
authorizer with `caller(request)`, shaped as a Kafka request context.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..security.oauthbearer import InvalidBearerToken, claimed_subject
from ..security.principal_mapping import PrincipalMappingError
from ..security.scram import AuthenticationFailed
from ..security.tls import CertificatePrincipals
from .common import BROKER
from .login_cache import LoginCache

if TYPE_CHECKING:
    from ..broker.cluster import Cluster
    from ..config import BrokerConfig

ANONYMOUS = "User:ANONYMOUS"
UNAUTHENTICATED_PATHS = ("/health/",)  # orchestrators' probes carry no credentials
_PRINCIPAL: web.RequestKey[str] = web.RequestKey("principal", str)
LOGINS: web.AppKey[LoginCache] = web.AppKey("logins", LoginCache)
_principal: contextvars.ContextVar[str] = contextvars.ContextVar("rest_principal", default=ANONYMOUS)
_peer: contextvars.ContextVar[str] = contextvars.ContextVar("rest_peer", default="rest-proxy")
_entry: contextvars.ContextVar[str] = contextvars.ContextVar("rest_entry", default="HTTP")
audit = logging.getLogger("kafkacompat.audit")
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class HttpCaller:
    """An HTTP request as the authorizer reads a Kafka request context: who, from where, through which route."""

    cluster: "Cluster"
    principal: str
    peer: str
    entry: str
    header: None = None  # no Kafka API: audit lines say api=-


def login_method(config: "BrokerConfig") -> str:
    """How HTTP clients log in: as configured, but never "none" on a broker with an authorizer unless http_open."""
    method = config.http_authentication
    authorizing = config.authorizer or bool(config.super_users)
    return "basic" if method == "none" and authorizing and not config.http_open else method


def entry_of(request: web.Request) -> str:
    """The audit lines' entry point of a request: HTTP, its method and its route (not the filled-in path)."""
    route = request.match_info.route.resource
    return f"HTTP {request.method} {route.canonical if route is not None else request.path}"


def caller(request: web.Request) -> HttpCaller:
    """The request's principal for authorizer calls the HTTP server makes itself."""
    cluster = request.app[BROKER].cluster
    if cluster is None:
        raise web.HTTPServiceUnavailable(reason="the store is not open (yet)")
    return HttpCaller(cluster, principal_of(request), current_peer(), entry_of(request))


def principal_of(request: web.Request) -> str:
    """The Kafka principal ("User:name") this HTTP request acts as."""
    return request.get(_PRINCIPAL, ANONYMOUS)


def current_principal() -> str:
    """The principal of the HTTP request being served (ANONYMOUS outside one)."""
    return _principal.get()


def current_entry() -> str:
    """The route of the HTTP request being served, for the audit lines of the Kafka calls it makes."""
    return _entry.get()


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
    method = login_method(request.app[BROKER].config)
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
    _entry.set(entry_of(request))
    return await handler(request)


def add_routes(app: web.Application) -> None:
    app[LOGINS] = LoginCache()
    app.middlewares.append(identify)
    config = app[BROKER].config
    method, authorizing = login_method(config), config.authorizer or bool(config.super_users)
    if method != config.http_authentication:
        log.info("HTTP logins: %s (the broker has an authorizer; http_open serves the HTTP port without logins)",
                 method)
    elif method == "none" and authorizing:
        log.warning("the HTTP port is open (http_open): every HTTP client acts as User:ANONYMOUS without a login; "
                    "the authorizer still decides what User:ANONYMOUS may do")
