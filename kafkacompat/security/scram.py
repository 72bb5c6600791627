"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's brokers speak it, and the keys it stores.

The store keeps what RFC 5802 calls StoredKey and ServerKey with the salt
and iteration count, never the password: a stolen store gives no password
and no way to log in. The server proves itself with its ServerSignature.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
from collections.abc import Callable

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for these mechanisms
DEFAULT_ITERATIONS = 4096  # Kafka's default (kafka-configs.sh without iterations=)
# Kafka's message for a failed SCRAM exchange: unknown user and wrong password look the same
INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class AuthenticationFailed(Exception):
    """A login refused; str() is what the client is told (never a secret)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_record(self) -> dict:
        return {
            "salt": base64.b64encode(self.salt).decode(),
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_record(cls, record: dict) -> "ScramCredential":
        return cls(base64.b64decode(record["salt"]), base64.b64decode(record["stored_key"]),
                   base64.b64decode(record["server_key"]), int(record["iterations"]))


@dataclasses.dataclass(frozen=True, slots=True)
class TokenLogin:
    """What a SCRAM login with a delegation token needs: the credential to check, whom it logs in, until when."""

    credential: ScramCredential
    owner_name: str  # the principal is User:<owner_name>, as Kafka's DelegationTokenCache.owner gives it
    expiry_ms: int


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2); passwords are taken as UTF-8, as Kafka does."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials sends (a salted password) as the keys to store."""
    hash_name = HASHES[mechanism]
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    return ScramCredential(salt, stored_key, _hmac(hash_name, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A new credential with a fresh random salt."""
    salt = secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether a clear password (SASL/PLAIN) is the one this credential was made from."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    candidate = credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM message attribute {part[:40]!r}")
        out.append((key, value))
    return out


def _sasl_name(value: str) -> str:
    """RFC 5802 saslname: '=2C' is ',' and '=3D' is '='; any other '=' is malformed."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("malformed SCRAM username")
    return value.replace("=2C", ",").replace("=3D", "=")


def _extensions(attributes: list[str]) -> dict[str, str]:
    """The SCRAM extensions after the nonce, key=value each (Kafka's ScramExtensions; it ignores unknown keys)."""
    out = {}
    for part in attributes:
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise AuthenticationFailed(f"malformed SCRAM extension {part[:40]!r}")
        out[key] = value
    return out


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final.

    `lookup(user)` gives the user's credential for this mechanism or None;
    with the extension tokenauth=true the user name is a delegation token id
    and `token_lookup(id)` gives its credential and owner instead (Kafka's
    ScramSaslServer), who is then the one authenticated.
    An unknown user or token gets a made-up salt and fails at the proof like
    a wrong password does, so the exchange does not tell which names exist.
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 token_lookup: Callable[[str], TokenLogin | None] = lambda token_id: None) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.username: str | None = None  # the SCRAM user name: a user, or a token id
        self.authorization_id: str | None = None  # who logs in: the user, or the token's owner
        self.token_auth = False  # the client asked to log in with a delegation token (tokenauth=true)
        self.token: TokenLogin | None = None  # the token a tokenauth=true login used
        self.done = False
        self._credential: ScramCredential | None = None
        self._step = 0
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def _fail(self) -> AuthenticationFailed:
        return AuthenticationFailed(INVALID_CREDENTIALS.format(self.mechanism))

    def evaluate(self, token: bytes) -> bytes:
        """The answer to one client token; AuthenticationFailed ends the exchange."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(text).encode()
        if self._step == 1:
            self._step = 2
            return self._client_final(text).encode()
        raise AuthenticationFailed("unexpected SCRAM message after the exchange ended")

    def _client_first(self, text: str) -> str:
        cbind, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep1 and sep2) or cbind not in ("n", "y"):
            raise AuthenticationFailed("malformed SCRAM client-first message (channel binding is not supported)")
        parts = bare.split(",")
        attributes = _attributes(",".join(parts[:2]))
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" or not attributes[1][1]:
            raise AuthenticationFailed("malformed SCRAM client-first message")
        username = _sasl_name(attributes[0][1])
        if authzid and authzid != f"a={attributes[0][1]}":
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.token_auth = _extensions(parts[2:]).get("tokenauth", "").lower() == "true"
        self.username = username
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        if self.token_auth:
            self.token = self._token_lookup(username) if username else None
            self._credential = self.token.credential if self.token is not None else None
            self.authorization_id = self.token.owner_name if self.token is not None else None
        else:
            self._credential = self._lookup(username) if username else None
            self.authorization_id = username
        shown = self._credential
        if shown is None:  # a salt stable per name and made-up keys: the proof will not verify
            fake_salt = hashlib.new(self._hash, b"kafkacompat-unknown-user:" + username.encode()).digest()[:32]
            shown = ScramCredential(fake_salt, b"", b"", DEFAULT_ITERATIONS)
        self._nonce = attributes[1][1] + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={base64.b64encode(shown.salt).decode()},i={shown.iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("malformed SCRAM client-final message")
        attributes = dict(_attributes(without_proof))
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attributes.get("c") != expected_binding:
            raise AuthenticationFailed("SCRAM channel binding does not match the client-first message")
        # endswith, as Kafka checks: older librdkafka (kcat on Debian) sends its own nonce again in front
        if not attributes.get("r", "").endswith(self._nonce):
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM client proof") from None
        credential = self._credential
        if credential is None or len(proof) != len(credential.stored_key):
            raise self._fail()
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise self._fail()
        self.done = True
        return "v=" + base64.b64encode(_hmac(self._hash, credential.server_key, auth_message)).decode()


class ScramClient:
    """The client side of the exchange (the admin CLI's own connections, and tests that drive each step)."""

    def __init__(self, mechanism: str, username: str, password: str, *, token: bool = False) -> None:
        """`token`: log in with a delegation token (username: its id, password: its base64 HMAC)."""
        self._hash = HASHES[mechanism]
        self.mechanism, self.password = mechanism, password
        self.nonce = secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={name},r={self.nonce}" + (",tokenauth=true" if token else "")
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        """client-final for a server-first message (`nonce` replaces the server's, to test a refusal)."""
        attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
        if not attrs.get("r", "").startswith(self.nonce):
            raise AuthenticationFailed("the server's SCRAM nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._hash, self.password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        credential = credential_from_salted(self.mechanism, salted, b"", 0)
        without_proof = f"c=biws,r={nonce or attrs['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = b"v=" + base64.b64encode(_hmac(self._hash, credential.server_key, auth_message))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        """Whether the server proved it knows the credential (its signature matches)."""
        return hmac.compare_digest(server_final, self._server_signature)
