"""Injected error answers are well-formed for every version of every API they cover.

Clients only read what encodes and decodes, and group APIs have no handler
in every build yet, so each version's answer is round-tripped through kio
here; the client-level tests show how clients react to them.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from typing import Any

import pytest
from kafkacompat.protocol.error_answers import error_from_request
from kafkacompat.protocol.messages import encode_body, request_schema, response_schema
from kio.index import UnknownEntity
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kafkacompat.handlers import ERROR_ANSWERS

INJECTED = ErrorCode.not_coordinator


def _versions(api_key: int) -> list[int]:
    found = []
    for version in range(20):
        try:
            request_schema(api_key, version)
            response_schema(api_key, version)
        except (LookupError, ImportError, KeyError, UnknownEntity):
            continue
        found.append(version)
    return found


def _sample(cls: type) -> Any:
    """A request with one item in every array, so the answer has something to mirror."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        values[f.name] = _sample_value(f, hints[f.name])
    return cls(**values)


def _sample_value(f: dataclasses.Field[Any], tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = args[0] if typing.get_origin(tp) in (typing.Union, type(int | None)) and len(args) == 1 else tp
    if typing.get_origin(base) is tuple:
        item = typing.get_args(base)[0]
        return (_sample(item) if dataclasses.is_dataclass(item) else _scalar(f.metadata.get("kafka_type"), f.name),)
    if dataclasses.is_dataclass(base):
        return _sample(base)
    return _scalar(f.metadata.get("kafka_type"), f.name)


def _scalar(kind: str | None, name: str) -> Any:
    if kind == "string":
        return f"{name}-1"
    if kind in ("bytes", "records"):
        return b""
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=1)
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(seconds=1)
    if kind == "float64":
        return 1.0
    if kind == "error_code":
        return ErrorCode.none
    return 1


def _error_codes(entity: Any, path: str = "") -> list[tuple[str, ErrorCode]]:
    out = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code" or f.metadata.get("kafka_type") == "error_code":
            out.append((path + f.name, value))
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                out.extend(_error_codes(item, f"{path}{f.name}[]."))
    return out


FROM_REQUEST = {key: shape for key, shape in ERROR_ANSWERS.items() if shape.changes_state}  # the handler never runs
CASES = [(key, version) for key in sorted(FROM_REQUEST) for version in _versions(key)]


@pytest.mark.parametrize("api_key, version", CASES, ids=[f"{k}v{v}" for k, v in CASES])
def test_every_error_code_of_the_answer_carries_the_fault(api_key: int, version: int) -> None:
    request = _sample(request_schema(api_key, version))
    answer = error_from_request(FROM_REQUEST[api_key], api_key, version, request, INJECTED)
    decoded, _ = entity_reader(response_schema(api_key, version))(encode_body(answer), 0)
    codes = _error_codes(decoded)
    if api_key == 1:  # Fetch v7+: the top-level code is about fetch sessions, and stays 0
        top = [code for path, code in codes if path == "error_code"]
        assert top in ([], [ErrorCode.none])
        codes = [(path, code) for path, code in codes if path != "error_code"]
    assert codes, "the answer carries no error code at all"
    assert {code for _, code in codes} == {INJECTED}
    shape = FROM_REQUEST[api_key]
    if shape.response and any(hasattr(request, name) for name in shape.request) and hasattr(decoded, shape.response):
        # every item the request named is answered, down to partitions (where this version answers per item:
        # UpdateFeatures v2 has a top-level code only)
        assert any("[]." in path for path, _ in codes)


def test_every_advertised_api_can_have_errors_injected() -> None:
    from kafkacompat.handlers import HANDLERS, SUPPORTED

    advertised = [key for key in HANDLERS if key in SUPPORTED]  # what Kafka clients call
    missing = [key for key in advertised if key not in ERROR_ANSWERS]
    assert missing == []
