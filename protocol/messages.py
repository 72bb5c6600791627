"""Request and response envelopes: headers plus kio-generated bodies."""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import sys
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from .request_bounds import RequestBoundsError, check_request_body, read_uvarint
from .versions import API_VERSIONS_KEY, is_flexible, schema

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class MalformedRequestError(ValueError):
    """Bytes that do not parse as the request they claim to be."""


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def _read_uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, len(buf))
    except RequestBoundsError as exc:
        raise MalformedRequestError(f"{exc} in request header") from exc


def parse_request_header(frame: bytes | bytearray) -> RequestHeader:
    """Header v1 (client id) for classic versions, v2 (+ tagged fields) for flexible."""
    if len(frame) < 10:
        raise MalformedRequestError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    (length,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id = None
    if length >= 0:
        if pos + length > len(frame):
            raise MalformedRequestError("truncated client id in request header")
        client_id = frame[pos : pos + length].decode("utf-8", "replace")
        pos += length
    if is_flexible(api_key, version):
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise MalformedRequestError("truncated tagged fields in request header")
    return RequestHeader(api_key, version, correlation_id, client_id, pos)


@functools.cache
def _reader(api_key: int, version: int) -> Any:
    return entity_reader(schema(api_key, version, EntityType.request))


@functools.cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def make(cls: type, **values: Any) -> Any:
    """Build a kio entity from the values its version has; others are dropped.

    Handlers describe one answer for every version of an API; each version's
    dataclass keeps only the fields that version carries.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def response_module(api_key: int, version: int) -> Any:
    """The kio module holding a response version's nested entity classes."""
    return sys.modules[response_schema(api_key, version).__module__]


def request_schema(api_key: int, version: int) -> type:
    return schema(api_key, version, EntityType.request)


def response_schema(api_key: int, version: int) -> type:
    return schema(api_key, version, EntityType.response)


def decode_request(header: RequestHeader, frame: bytes | bytearray) -> Any:
    """The kio request object; MalformedRequestError when the body does not parse."""
    if not isinstance(frame, bytes):  # kio reads bytes only; large frames arrive as bytearray
        frame = bytes(frame)
    request_type = schema(header.api_key, header.api_version, EntityType.request)
    try:
        # kio allocates from lengths it has not checked (see request_bounds): check first.
        check_request_body(request_type, frame, header.body_offset)
        body, size = _reader(header.api_key, header.api_version)(frame, header.body_offset)
    except MalformedRequestError:
        raise
    except Exception as exc:  # kio raises assorted errors on bad bytes
        raise MalformedRequestError(
            f"cannot parse {request_type.__name__} v{header.api_version}: {exc}"
        ) from exc
    # Like Kafka's own parser, ignore bytes after the body: librdkafka 2.x
    # sends three after some flexible requests (e.g. Metadata v12).
    return body


def request_header(api_key: int, version: int, correlation_id: int, client_id: bytes) -> bytes:
    """A request header as a client sends it: v1 (v2, with its empty tagged fields, where the API's
    version is flexible)."""
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return head + b"\x00" if is_flexible(api_key, version) else head


def encode_body(body: Any) -> bytes:
    buf = io.BytesIO()
    _writer(body.__class__)(buf, body)
    return buf.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, body: Any | bytes) -> bytes:
    """A whole response frame: size, header (v0, or v1 when flexible), body.

    ApiVersions always answers with header v0 so that a client can read it
    whatever version it asked for.
    """
    payload = body if isinstance(body, (bytes, bytearray)) else encode_body(body)
    flexible_header = api_key != API_VERSIONS_KEY and is_flexible(api_key, version)
    head = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    return _I32.pack(len(head) + len(payload)) + head + payload


def response_chunks(api_key: int, version: int, correlation_id: int, body: Any) -> list[Any]:
    """A whole response frame as buffers for `writelines`.

    A body given as a list of buffers (a hand-encoded Fetch response) is
    framed without copying its large parts; the frame header is joined to
    its first, small, chunk so it never travels alone.
    """
    if not isinstance(body, list):
        return [encode_response(api_key, version, correlation_id, body)]
    flexible_header = api_key != API_VERSIONS_KEY and is_flexible(api_key, version)
    head = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    size = len(head) + sum(len(chunk) for chunk in body)
    if not body:
        return [_I32.pack(size) + head]
    return [_I32.pack(size) + head + body[0], *body[1:]]
