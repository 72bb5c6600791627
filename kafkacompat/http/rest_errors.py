"""Confluent REST Proxy's error JSON and codes, so REST clients read our refusals as theirs.

Every refusal is `{"error_code": N, "message": "..."}`. The codes are
Confluent's (kafka-rest Errors and rest-utils KafkaExceptionMapper): a
5-digit code whose first three digits are the HTTP status (40401 topic not
found, 40402 partition not found, 40403 unknown topic or partition from
Kafka / consumer instance not found, 42206 payload error, 40801
serialization, 50002 any other Kafka error, 50003 a retriable one), or
the bare HTTP status where Confluent answers with one (400 bad JSON, 404).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web
from kio.schema.errors import ErrorCode

log = logging.getLogger(__name__)

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
UNKNOWN_TOPIC_OR_PARTITION = 40403
CONSUMER_INSTANCE_NOT_FOUND = 40403
CONSUMER_GROUP_NOT_FOUND = 40405
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
INVALID_CONSUMER_CONFIG = 42204
INVALID_PAYLOAD = 42206
KAFKA_BAD_REQUEST = 40002
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003

JSON_CONTENT = "application/json"


class RestError(Exception):
    """A refusal answered as Confluent's error JSON with this HTTP status and error code."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.code, "message": self.message}


def not_found(message: str) -> RestError:
    """A missing REST resource (cluster, broker, group, config): Confluent's v3 answers a plain 404."""
    return RestError(404, 404, message)


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


def invalid_payload(message: str) -> RestError:
    return RestError(422, INVALID_PAYLOAD, f"Payload error. {message}")


def topic_not_found() -> RestError:
    return RestError(404, TOPIC_NOT_FOUND, "Topic not found.")


def partition_not_found() -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, "Partition not found.")


def consumer_instance_not_found() -> RestError:
    return RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


# Kafka errors as rest-utils' KafkaExceptionMapper answers their exceptions.
_BAD_REQUEST = {
    ErrorCode.invalid_replication_factor, ErrorCode.security_disabled, ErrorCode.unsupported_version,
    ErrorCode.invalid_partitions, ErrorCode.invalid_request, ErrorCode.unknown_server_error,
    ErrorCode.policy_violation, ErrorCode.topic_already_exists, ErrorCode.invalid_config,
    # Kafka's mapper answers InvalidTopicException with 50002; a bad name is the caller's error, so 400 here
    ErrorCode.invalid_topic_exception,
}
_RETRIABLE = {
    ErrorCode.corrupt_message, ErrorCode.leader_not_available, ErrorCode.not_leader_or_follower,
    ErrorCode.request_timed_out, ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.kafka_storage_error, ErrorCode.rebalance_in_progress,
    ErrorCode.throttling_quota_exceeded, ErrorCode.concurrent_transactions, ErrorCode.unstable_offset_commit,
}


def kafka_error(code: ErrorCode, message: str | None = None) -> RestError:
    """The REST answer for a Kafka error code returned by a broker handler."""
    text = message or code.name.upper()
    if code == ErrorCode.unknown_topic_or_partition:
        return RestError(404, UNKNOWN_TOPIC_OR_PARTITION, message or "This server does not host this topic-partition.")
    if code in _BAD_REQUEST:
        return RestError(400, KAFKA_BAD_REQUEST, text)
    if code.name.endswith("authorization_failed"):
        return RestError(403, KAFKA_AUTHORIZATION, text)
    if code in (ErrorCode.sasl_authentication_failed,):
        return RestError(401, KAFKA_AUTHENTICATION, text)
    if code in _RETRIABLE:
        return RestError(500, KAFKA_RETRIABLE, text)
    return RestError(500, KAFKA_ERROR, f"Kafka error: {text}")


def check(code: int | ErrorCode, message: str | None = None) -> None:
    """Raise the REST refusal for a non-zero Kafka error code from a handler's answer."""
    code = ErrorCode(code)
    if code != ErrorCode.none:
        raise kafka_error(code, message)


def respond(error: RestError) -> web.Response:
    return web.Response(text=json.dumps(error.body()), status=error.status, content_type=JSON_CONTENT)


# Jackson's StreamReadConstraints bound what Confluent's proxy parses; these bound ours, so JSON nested
# deeper than Python can recurse, or a number too long for int(), is a 400 rather than a 500.
MAX_JSON_DEPTH = 500
MAX_NUMBER_CHARS = 1000  # Jackson's default maxNumberLength


class JsonLimitError(ValueError):
    """JSON that parses but exceeds MAX_JSON_DEPTH or MAX_NUMBER_CHARS."""


def _number(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise JsonLimitError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
        return kind(text)
    return parse


def _within_depth(value: Any) -> Any:
    """`value` when no array or object in it is nested deeper than MAX_JSON_DEPTH, else JsonLimitError."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise JsonLimitError(f"nesting deeper than {MAX_JSON_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


_DECODER = json.JSONDecoder(parse_int=_number(int), parse_float=_number(float))


def bounded_raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """json's raw_decode within the depth and number limits (JsonLimitError beyond them)."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise JsonLimitError(f"nesting deeper than {MAX_JSON_DEPTH} levels") from None
    if text.count("[", pos, end) + text.count("{", pos, end) > MAX_JSON_DEPTH:  # else it cannot be too deep
        _within_depth(value)
    return value, end


def bounded_loads(data: str | bytes) -> Any:
    """One JSON document within the limits; JSONDecodeError, UnicodeDecodeError or JsonLimitError otherwise."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    value, end = bounded_raw_decode(text, len(text) - len(text.lstrip()))
    if text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end)
    return value


async def read_json(request: web.Request) -> Any:
    """The body as JSON; Confluent's 400 for JSON that does not parse or is out of bounds, 422 for no body."""
    raw = await request.read()
    if not raw.strip():
        raise invalid_payload("Request body is empty. Data is required.")
    try:
        return bounded_loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"Unexpected character in JSON: {exc}") from None
    except JsonLimitError as exc:
        raise bad_request(f"JSON refused: {exc}") from None


def field(body: Any, name: str, kind: type | tuple[type, ...], default: Any = ..., *, required: bool = False) -> Any:
    """A field of a JSON object body of the given JSON type, or Confluent's 422 naming it."""
    if not isinstance(body, dict):
        raise invalid_payload("Expected a JSON object.")
    if name not in body or body[name] is None:
        if required or default is ...:
            raise invalid_payload(f"Field '{name}' is required.")
        return default
    value = body[name]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise invalid_payload(f"Field '{name}' has the wrong type.")
    if not isinstance(value, kind):
        raise invalid_payload(f"Field '{name}' has the wrong type.")
    return value


INT16 = (-(2**15), 2**15 - 1)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def int_field(body: Any, name: str, default: Any = ..., *, bounds: tuple[int, int] = INT32,
              required: bool = False) -> Any:
    """An integer field within the Kafka field's range (int32 unless told), or Confluent's 422."""
    value = field(body, name, int, default, required=required)
    if value is not None and value is not default and not bounds[0] <= value <= bounds[1]:
        raise invalid_payload(f"Field '{name}' is out of range [{bounds[0]}, {bounds[1]}].")
    return value


@web.middleware
async def rest_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """RestError as Confluent's error JSON; anything unexpected as a logged 500 in the same shape."""
    try:
        return await handler(request)
    except RestError as exc:
        return respond(exc)
    except (web.HTTPException, ConnectionResetError):  # the latter: the client went away; nothing to answer
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return respond(RestError(500, 500, "Internal Server Error"))


def add_routes(app: web.Application) -> None:
    app.middlewares.append(rest_errors)
