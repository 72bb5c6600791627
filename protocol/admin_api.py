"""The broker's private admin API: streams, topics and cursors as JSON.

Streams and cursors have no Kafka API, so the `kafkacompat` command line
speaks one extra request on the broker's own port. A request is a standard
Kafka request header v1 (api key, version, correlation id, client id) with
the reserved key STREAM_ADMIN_KEY, then a UTF-8 JSON object naming the
operation, e.g. {"op": "stream.create", "path": "/apps/x", "policy": {...}}.
The answer is a response header v0 (the correlation id) then a JSON object
{"error_code": int, "error": str | null, "result": ...}.

An answer may carry raw bytes after its JSON (a worker's records, for
another worker of `serve --workers N`): then the JSON is preceded by its
4-byte length (`encode_response_with_payload`); a bare JSON answer starts
with `{`, which no length of under 2 GB does, so a reader tells them apart.

The key is never advertised in ApiVersions, so stock clients never see it.
This module is pure and free of kio, so the command line starts quickly.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from typing import Any

STREAM_ADMIN_KEY = 32767  # far above Kafka's own keys, which grow from 0
STREAM_ADMIN_VERSION = 0
STREAM_ADMIN_NAME = "StreamAdmin"
# The same framing between the workers of `serve --workers N`: share-group state kept at worker 0
WORKER_STATE_KEY = 32765
WORKER_STATE_VERSION = 0
WORKER_STATE_NAME = "WorkerState"

_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")


class AdminMessageError(ValueError):
    """Bytes that are not a well-formed admin request or response."""


@dataclasses.dataclass(frozen=True, slots=True)
class AdminReply:
    error_code: int  # a Kafka error code; 0 is success
    error: str | None  # what went wrong, for people
    result: Any


def encode_request(correlation_id: int, body: dict[str, Any], client_id: str = "kafkacompat-cli",
                   key: int = STREAM_ADMIN_KEY) -> bytes:
    """A whole request frame (size prefix included) carrying `body` as JSON (to StreamAdmin, or `key`)."""
    client = client_id.encode()
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = _HEADER.pack(key, STREAM_ADMIN_VERSION, correlation_id, len(client)) + client
    return _SIZE.pack(len(head) + len(payload)) + head + payload


def decode_request_body(frame: bytes, body_offset: int) -> dict[str, Any]:
    """The JSON object after the request header; AdminMessageError if it is not one."""
    body = _load(frame[body_offset:], "request")
    if not isinstance(body.get("op"), str):
        raise AdminMessageError("admin request has no 'op' string")
    return body


def encode_response_body(error_code: int, error: str | None, result: Any) -> bytes:
    """The response body (the connection adds size and header)."""
    return json.dumps({"error_code": error_code, "error": error, "result": result}, separators=(",", ":")).encode()


def encode_response_with_payload(error_code: int, error: str | None, result: Any, payload: bytes) -> bytes:
    """A response body whose JSON is followed by raw bytes (records, not base64 in the JSON)."""
    meta = encode_response_body(error_code, error, result)
    return _SIZE.pack(len(meta)) + meta + payload


def decode_response_with_payload(frame: bytes) -> tuple[int, AdminReply, memoryview]:
    """(correlation id, reply, payload) from a response frame without its size prefix; the payload is
    empty for a bare JSON answer (an error answered before any bytes)."""
    view = memoryview(frame)
    if len(view) > 4 and view[4] != ord("{"):
        if len(view) < 8:
            raise AdminMessageError("admin response with a payload is shorter than its header")
        (length,) = _SIZE.unpack_from(view, 4)
        if length < 0 or 8 + length > len(view):
            raise AdminMessageError(f"admin response says {length} bytes of JSON but has {len(view) - 8}")
        correlation_id, reply = decode_response(bytes(view[:4]) + bytes(view[8:8 + length]))
        return correlation_id, reply, view[8 + length:]
    correlation_id, reply = decode_response(frame)
    return correlation_id, reply, view[len(view):]


def decode_response(frame: bytes) -> tuple[int, AdminReply]:
    """(correlation id, reply) from a response frame without its size prefix."""
    if len(frame) < 4:
        raise AdminMessageError(f"admin response of {len(frame)} bytes is shorter than its header")
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    body = _load(frame[4:], "response")
    code = body.get("error_code")
    if not isinstance(code, int):
        raise AdminMessageError("admin response has no integer 'error_code'")
    return correlation_id, AdminReply(code, body.get("error"), body.get("result"))


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        body = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AdminMessageError(f"admin {what} is not UTF-8 JSON: {exc}") from None
    if not isinstance(body, dict):
        raise AdminMessageError(f"admin {what} must be a JSON object")
    return body
