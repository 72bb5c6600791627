"""SASL logins per second: SCRAM-SHA-512 and OAUTHBEARER side by side on one broker.

    python -m kafkacompat.bench.logins [--logins 600] [--clients 4] [--rounds 3]

A login storm (a fleet restarting, a load balancer recycling connections)
is paid in broker CPU per login: SCRAM costs two round trips and a
credential lookup, OAUTHBEARER one round trip and an RSA signature check.
This starts one `kafkacompat serve` process with a SASL_PLAINTEXT listener
offering both, a SCRAM user and a JWKS file (an RSA 2048 key made with
`cryptography`), then per round and per mechanism makes --logins logins
from --clients threads, each a fresh TCP connection: SaslHandshake v1,
SaslAuthenticate v1 until done, close. It prints logins per second and the
broker's CPU milliseconds per login (read from /proc): the second does not
depend on the client's own cost (SCRAM's client-side PBKDF2, which also
eats into logins per second on a small machine). The audit logger writes its
line per login, as in production, into a file.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from kio.serial import entity_reader
from kio.static.constants import EntityType

from ..protocol.messages import encode_body, request_schema
from ..protocol.versions import schema
from ..security.scram import ScramClient
from ..testing.ports import free_port
from .procstats import cpu_seconds
from .tls import _wait_listening

MECHANISMS = ("SCRAM-SHA-512", "OAUTHBEARER")
USER, PASSWORD = "bench", "bench-password"


def _request(api_key: int, correlation: int, body: Any) -> bytes:
    payload = struct.pack(">hhih", api_key, 1, correlation, 5) + b"bench" + encode_body(body)
    return struct.pack(">i", len(payload)) + payload


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def _ask(sock: socket.socket, api_key: int, correlation: int, body: Any) -> Any:
    sock.sendall(_request(api_key, correlation, body))
    frame = _exactly(sock, struct.unpack(">i", _exactly(sock, 4))[0])
    answer, _ = entity_reader(schema(api_key, 1, EntityType.response))(frame, 4)
    if answer.error_code != 0:
        raise RuntimeError(f"login refused: {getattr(answer, 'error_message', answer.error_code)}")
    return answer


def _login(port: int, mechanism: str, token: str) -> None:
    """One login on a fresh connection, as a client (re)connecting makes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        _ask(sock, 17, 1, request_schema(17, 1)(mechanism=mechanism))
        authenticate = request_schema(36, 1)
        if mechanism == "OAUTHBEARER":
            message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
            if _ask(sock, 36, 2, authenticate(auth_bytes=message)).auth_bytes:
                raise RuntimeError("the token was refused")
            return
        client = ScramClient(mechanism, USER, PASSWORD)
        first = _ask(sock, 36, 2, authenticate(auth_bytes=client.first())).auth_bytes
        final = _ask(sock, 36, 3, authenticate(auth_bytes=client.final(bytes(first)))).auth_bytes
        if not client.verify(bytes(final)):
            raise RuntimeError("the broker's SCRAM signature is wrong")


def _storm(port: int, mechanism: str, token: str, logins: int, clients: int, pid: int) -> tuple[float, float]:
    """(logins per second, broker CPU ms per login) of `logins` logins from `clients` threads."""
    counter = itertools.count()
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if next(counter) >= logins:
                    return
            _login(port, mechanism, token)

    cpu0, start = cpu_seconds(pid), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for done in [pool.submit(work) for _ in range(clients)]:
            done.result()
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu0
    return logins / elapsed, cpu * 1000 / logins


def _identity_provider(folder: str) -> tuple[str, str]:
    """(file:// URL of a JWKS, a token it validates for an hour)."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = os.path.join(folder, "jwks.json")
    with open(path, "w") as fh:
        json.dump({"keys": [{**public, "kid": "bench", "use": "sig", "alg": "RS256"}]}, fh)
    now = int(time.time())
    token = jwt.encode({"sub": USER, "iat": now, "exp": now + 3600, "scope": "kafka"}, key, algorithm="RS256",
                       headers={"kid": "bench"})
    return f"file://{path}", token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.logins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--logins", type=int, default=600, help="logins per mechanism and round")
    parser.add_argument("--clients", type=int, default=4, help="client threads logging in at once")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkacompat-bench-logins-") as tmp:
        jwks_url, token = _identity_provider(tmp)
        port, data_dir = free_port(), os.path.join(tmp, "data")
        subprocess.run([sys.executable, "-m", "kafkacompat", "user", "add", USER, "--mechanism", "SCRAM-SHA-512",
                        "--password-stdin", "--data-dir", data_dir], input=PASSWORD + "\n", text=True, check=True,
                       capture_output=True)
        command = [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", data_dir,
                   "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--sasl-oauthbearer-jwks-endpoint-url",
                   jwks_url, *(arg for m in MECHANISMS for arg in ("--sasl-enabled-mechanism", m))]
        with open(os.path.join(tmp, "broker.log"), "w") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=log)
            try:
                _wait_listening(port, proc)
                results: dict[str, list[tuple[float, float]]] = {m: [] for m in MECHANISMS}
                _login(port, "OAUTHBEARER", token)  # warm: the first login loads what later ones reuse
                for _ in range(args.rounds):
                    for mechanism in MECHANISMS:
                        results[mechanism].append(_storm(port, mechanism, token, args.logins, args.clients,
                                                         proc.pid))
            finally:
                proc.terminate()
                proc.wait(30)
    print(f"{args.logins} logins per mechanism and round, {args.clients} client threads, {args.rounds} rounds "
          "(medians); each login a new connection")
    for mechanism in MECHANISMS:
        rate = statistics.median(r for r, _ in results[mechanism])
        cost = statistics.median(c for _, c in results[mechanism])
        print(f"  {mechanism:<14} {rate:8.0f} logins/s   broker CPU {cost:6.2f} ms/login")
    return 0


if __name__ == "__main__":
    sys.exit(main())
