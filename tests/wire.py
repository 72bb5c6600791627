"""A raw Kafka wire client for tests that must send exact bytes."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkacompat.protocol.messages import encode_body, request_schema
from kafkacompat.protocol.versions import is_flexible, schema
from kio.serial import entity_reader
from kio.static.constants import EntityType


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def header(self, api_key: int, version: int, client_id: str = "wire-test") -> bytes:
        self.correlation += 1
        cid = client_id.encode()
        head = struct.pack(">hhih", api_key, version, self.correlation, len(cid)) + cid
        if is_flexible(api_key, version):
            head += b"\x00"
        return head

    def frame(self, api_key: int, version: int, body: Any) -> bytes:
        """One size-prefixed request under the next correlation id (`self.correlation`), not sent."""
        payload = self.header(api_key, version) + (body if isinstance(body, bytes) else encode_body(body))
        return struct.pack(">i", len(payload)) + payload

    def send(self, api_key: int, version: int, body: Any) -> int:
        self.sock.sendall(self.frame(api_key, version, body))
        return self.correlation

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.read_frame()
        correlation = struct.unpack_from(">i", frame, 0)[0]
        pos = 4 + (1 if api_key != 18 and is_flexible(api_key, version) else 0)
        body, _ = entity_reader(schema(api_key, version, EntityType.response))(frame, pos)
        return correlation, body

    def request(self, api_key: int, version: int, body: Any) -> Any:
        sent = self.send(api_key, version, body)
        correlation, response = self.receive(api_key, version)
        assert correlation == sent
        return response

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed this connection (EOF)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def request_class(api_key: int, version: int) -> type:
    return request_schema(api_key, version)
