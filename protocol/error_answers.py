"""Error answers built from a request alone: what a refusal, a store outage or an injected fault answers.

A request refused as a whole (by the authorizer, by a store out of reach, by
a test's injected fault) must still be answered in the shape clients read:
an AlterConfigs refusal names every resource the request named, a Produce
refusal every topic and partition. Each handler module declares its API's
`ErrorAnswer` (which request array its response array echoes, item by item),
and the builders here turn a request and an error code into a kio response of
that shape. Pure: kio entities in, kio entities out, nothing of the broker.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from .messages import response_schema


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """How an API's error answer is built (its handler module declares it).

    changes_state: an injected error must not run the handler (a failed
    produce appends nothing), so the answer is built from the request alone;
    read-only APIs run their handler and get every error code replaced.
    request/response: the request arrays (the first present is used) that
    the response array echoes item by item; no response array: the answer
    carries a top-level error code only.
    """

    changes_state: bool
    request: tuple[str, ...] = ()
    response: str = ""
    # the items echoed when not the request array as is (a per-user answer to two request arrays...)
    items: Callable[[Any], tuple[Any, ...]] | None = None
    fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # fields set whatever the error
    older: tuple[int, ErrorAnswer] | None = None  # (version, shape): versions below it echo as that shape
    handler_refuses_below: int = 0  # versions the handler refuses itself: an injected fault runs it

    def at(self, version: int) -> ErrorAnswer:
        """The shape this version's answer has."""
        if self.older is not None and version < self.older[0]:
            return self.older[1]
        return self


def changes(request: tuple[str, ...] = (), response: str = "", **more: Any) -> ErrorAnswer:
    """A state-changing API's error answer (built from the request, the handler never runs)."""
    return ErrorAnswer(True, request, response, **more)


def reads(request: tuple[str, ...] = (), response: str = "", **more: Any) -> ErrorAnswer:
    """A read-only API's error answer (an injected error rewrites the real answer's codes)."""
    return ErrorAnswer(False, request, response, **more)


# Nested response arrays that echo a request array of the same item.
_NESTED = {
    "partition_responses": ("partition_data",),
    "partitions": ("partitions", "partition_indexes"),
    "results_by_partition": ("partitions",),
    "topics": ("topics",),
}
# Fields that say which topic, partition, member or resource an item is about,
# with the request field names they are taken from.
_IDENTITY = {
    "name": ("name",),
    "topic_name": ("name",),
    "topic": ("topic",),
    "topic_id": ("topic_id",),
    "index": ("index", "partition_index"),
    "partition_index": ("partition_index", "partition"),
    "partition": ("partition",),
    "group_id": ("group_id",),
    "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "producer_id": ("producer_id",),
    "feature": ("feature",),
}
_ITEM_NAMES = ("name", "group_id", "partition_index", "user")  # response fields echoing an array of plain names or indexes


def message(error: ErrorCode) -> str:
    return f"injected by kafkacompat: {error.name.upper()}"


def error_answer(shape: ErrorAnswer | None, api_key: int, version: int, request: Any, error: ErrorCode) -> Any:
    """The answer refusing `request` with `error`: as its API's shape says, or naming nothing without one."""
    if shape is None:
        return filled_response(api_key, version, error)
    return error_from_request(shape, api_key, version, request, error)


def error_from_request(shape: ErrorAnswer, api_key: int, version: int, request: Any, error: ErrorCode) -> Any:
    """The error answer mirroring what the request named, as `shape` says."""
    cls = response_schema(api_key, version)
    shape = shape.at(version)
    known: dict[str, Any] = {}
    if shape.response:
        items = next((getattr(request, s) for s in shape.request if hasattr(request, s)), None)
        if shape.items is not None and items is not None:
            items = shape.items(request)
        item_cls = _hints(cls).get(shape.response)
        if items is not None and item_cls is not None:
            element = _element(item_cls)
            assert element is not None, f"{shape.response} is not an array of entities"
            known[shape.response] = tuple(_mirror(element, item, error) for item in items)
    known.update(shape.fixed)
    return _filled(cls, error, known)


def filled_response(api_key: int, version: int, error: ErrorCode) -> Any:
    """A response carrying `error` everywhere and neutral values elsewhere (a refusal naming nothing)."""
    return _filled(response_schema(api_key, version), error, {})


def with_error(entity: Any, error: ErrorCode) -> Any:
    """A copy of a response with every error code (and message) set to `error`."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code" or f.metadata.get("kafka_type") == "error_code":
            changes[f.name] = error
        elif f.name == "error_message":
            changes[f.name] = message(error)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(with_error(item, error) for item in value)
        elif dataclasses.is_dataclass(value):
            changes[f.name] = with_error(value, error)
    return dataclasses.replace(entity, **changes)


def _mirror(cls: type, item: Any, error: ErrorCode) -> Any:
    """A response item naming what the request item named, carrying `error`."""
    if not dataclasses.is_dataclass(item):  # an array of names or group ids
        field = next(n for n in _ITEM_NAMES if n in _hints(cls))
        return _filled(cls, error, {field: item})
    known: dict[str, Any] = {}
    hints = _hints(cls)
    for name, tp in hints.items():
        source = next((s for s in _NESTED.get(name, ()) if hasattr(item, s)), None)
        element = _element(tp)
        if source is not None and element is not None:
            known[name] = tuple(_mirror(element, sub, error) for sub in getattr(item, source))
            continue
        for candidate in _IDENTITY.get(name, ()):
            if hasattr(item, candidate) and not isinstance(getattr(item, candidate), tuple):
                known[name] = getattr(item, candidate)
                break
    return _filled(cls, error, known)


def _filled(cls: type, error: ErrorCode, known: dict[str, Any]) -> Any:
    """An instance of a kio entity: `known` values, `error`, and neutral defaults."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in known:
            values[f.name] = known[f.name]
        elif f.name == "error_code" or f.metadata.get("kafka_type") == "error_code":
            values[f.name] = error
        elif f.name == "error_message":
            values[f.name] = message(error)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            values[f.name] = _neutral(f, _hints(cls)[f.name], error)
    return cls(**values)


def _neutral(f: dataclasses.Field[Any], tp: Any, error: ErrorCode) -> Any:
    kind = f.metadata.get("kafka_type")
    nullable = type(None) in typing.get_args(tp)
    if _element(tp) is not None or typing.get_origin(_base(tp)) is tuple:
        return None if nullable else ()
    if kind == "records" or kind == "bytes":
        return b""
    if kind == "string":
        return None if nullable else ""
    if kind == "uuid":
        return None if nullable else uuid.UUID(int=0)
    if kind == "bool":
        return False
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "datetime_i64":  # the epoch: a time no one takes for a real one (the token APIs' timestamps)
        return None if nullable else datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    if kind == "float64":
        return 0.0
    if kind == "uint16":
        return 0
    if kind and kind.startswith("int"):
        return -1
    base = _base(tp)
    if isinstance(base, type) and dataclasses.is_dataclass(base):
        return _filled(base, error, {})
    raise TypeError(f"no neutral value for field {f.name} of type {tp}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _base(tp: Any) -> Any:
    """T for `T | None`."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _element(tp: Any) -> type | None:
    """X for `tuple[X, ...]` (or its optional form) when X is an entity, else None."""
    base = _base(tp)
    if typing.get_origin(base) is tuple:
        args = typing.get_args(base)
        if args and dataclasses.is_dataclass(args[0]):
            return typing.cast(type, args[0])
    return None
