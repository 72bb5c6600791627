"""An OpenID Connect identity provider made inside the test: RSA keys, a JWKS and a token endpoint on loopback.

What a broker under test meets in production (Keycloak, Okta, Entra ID):
`/jwks` publishes the public keys, `/token` answers the client_credentials
grant of Java's and librdkafka's built-in OIDC clients with a signed JWT.
Tokens for the refusal cases (expired, other audience, signed by a key the
JWKS does not hold) are made with `token(...)`.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://idp.example.test/realms/kafka"
AUDIENCE = "kafkacompat"
# client_credentials: the client id is the token's subject; the stranger's tokens are signed by a key the JWKS lacks
CLIENTS = {"billing-service": "billing-secret", "stranger-service": "stranger-secret"}


class Issuer:
    """Signs tokens with its key `kid`; serves the JWKS and the token endpoint until `close()`."""

    def __init__(self, kid: str = "key-1") -> None:
        self.kid = kid  # the key that signs from now on
        self.keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048)}  # all published
        self.stranger_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks_fetches = 0
        self.published = True  # False: /jwks answers 503, as a provider that is down
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def key(self) -> Any:
        return self.keys[self.kid]

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid,
                          "use": "sig", "alg": "RS256"} for kid, key in self.keys.items()]}

    def rotate(self, kid: str) -> None:
        """Sign with key `kid` from now on, made and published now if new; the others stay published,
        as a provider rolling its keys over does."""
        if kid not in self.keys:
            self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid

    def token(self, sub: str = "alice", *, lifetime_s: float = 600, audience: str | None = AUDIENCE,
              issuer: str = ISSUER, key: Any = None, scope: Any = "kafka", kid: str | None = None,
              **claims: Any) -> str:
        now = int(time.time())
        payload = {"sub": sub, "iss": issuer, "iat": now, "exp": int(now + lifetime_s), "scope": scope, **claims}
        if audience is not None:
            payload["aud"] = audience
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    return self._json(404, {"error": "not_found"})
                issuer.jwks_fetches += 1
                if not issuer.published:
                    return self._json(503, {"error": "unavailable"})
                self._json(200, issuer.jwks())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                client_id, secret = _client(self.headers.get("Authorization", ""), form)
                if form.get("grant_type") != "client_credentials" or CLIENTS.get(client_id) != secret:
                    return self._json(401, {"error": "invalid_client"})
                key = issuer.stranger_key if client_id == "stranger-service" else None
                token = issuer.token(client_id, lifetime_s=300, key=key)
                self._json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})

        return Handler


def _client(authorization: str, form: dict[str, str]) -> tuple[str, str]:
    """The client id and secret of a token request: HTTP Basic (Java, librdkafka) or form fields."""
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() == "basic":
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        return urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
    return form.get("client_id", ""), form.get("client_secret", "")


def client_first(token: str, authzid: str = "", **extensions: str) -> bytes:
    """The RFC 7628 client first message a Kafka client sends."""
    pairs = "".join(f"{key}={value}\x01" for key, value in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{pairs}\x01".encode()
