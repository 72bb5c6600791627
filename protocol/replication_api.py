"""The broker's private replication API: one cluster ships a stream to another.

Like the admin API (admin_api.py) it is a standard request header v1 with a
reserved key, never advertised in ApiVersions. The body is a 4-byte length,
a UTF-8 JSON object naming the operation (e.g. {"op": "append", "stream":
"/s", "topic": "t", "partition": 0, "base": 42, ...}), then raw bytes: the
record batches being shipped, byte for byte, optionally compressed as a
whole (the JSON says which codec). The answer is the admin API's JSON
response ({"error_code", "error", "result"}) after a response header v0.

Pure and free of kio, like admin_api.py.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from .admin_api import AdminMessageError

REPLICATE_KEY = 32766  # beside STREAM_ADMIN_KEY, far above Kafka's own keys
REPLICATE_VERSION = 0
REPLICATE_NAME = "StreamReplicate"

_HEADER = struct.Struct(">hhih")
_I32 = struct.Struct(">i")


def encode_request(correlation_id: int, body: dict[str, Any], payload: bytes = b"",
                   client_id: str = "kafkacompat-replica") -> bytes:
    """A whole request frame (size prefix included): header, JSON body, raw payload."""
    client = client_id.encode()
    meta = json.dumps(body, separators=(",", ":")).encode()
    head = _HEADER.pack(REPLICATE_KEY, REPLICATE_VERSION, correlation_id, len(client)) + client
    size = len(head) + 4 + len(meta) + len(payload)
    return _I32.pack(size) + head + _I32.pack(len(meta)) + meta + payload


def decode_request_body(frame: bytes, body_offset: int) -> tuple[dict[str, Any], memoryview]:
    """(JSON object, payload bytes) after the request header; AdminMessageError if malformed."""
    view = memoryview(frame)
    if len(view) - body_offset < 4:
        raise AdminMessageError("replication request has no body")
    (length,) = _I32.unpack_from(view, body_offset)
    start = body_offset + 4
    if length < 0 or start + length > len(view):
        raise AdminMessageError(f"replication request says {length} bytes of JSON but has {len(view) - start}")
    try:
        body = json.loads(bytes(view[start:start + length]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AdminMessageError(f"replication request is not UTF-8 JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("op"), str):
        raise AdminMessageError("replication request must be a JSON object with an 'op' string")
    return body, view[start + length:]
