"""Faults a test injects into a running broker, seen by any client on the wire.

Users test their retry paths with these: the next N requests of an API fail
with a Kafka error code, answers are delayed, connections are dropped. The
connection layer looks the request's API key up in `Faults.rules` (one dict
lookup, nothing more while no fault is set) and hands matching requests to
`apply`.

An injected error must not have side effects (a failed produce appends
nothing, as with NOT_LEADER_OR_FOLLOWER on Kafka), so APIs that change state
get an error answer built from the request alone; read-only APIs run their
real handler and get every error code of its answer replaced.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import enum
import functools
import logging
import threading
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kio.schema.index import api_key_map

from kafkacompat.protocol.messages import response_schema
from kafkacompat.protocol.versions import api_name

from ..handlers import HANDLERS
from ..handlers.common import NO_RESPONSE, CloseConnection
from ..handlers.produce import FIRST_SERVED_VERSION as FIRST_SERVED_PRODUCE

log = logging.getLogger(__name__)


class Kind(enum.Enum):
    ERROR = "error"
    DELAY = "delay"
    DISCONNECT = "disconnect"


@dataclasses.dataclass(slots=True)
class Rule:
    kind: Kind
    remaining: int | None  # None: until cleared
    error: ErrorCode = ErrorCode.none
    seconds: float = 0.0
    after_handling: bool = False


# API keys whose error answers are built from the request (the real handler
# would change state). Value: (request array, response array) at the top
# level, or None when the answer carries a top-level error code only.
_FROM_REQUEST: dict[int, tuple[tuple[str, ...], str] | None] = {
    0: (("topic_data",), "responses"),  # Produce
    1: (("topics",), "responses"),  # Fetch (a long poll would delay the error)
    8: (("topics",), "topics"),  # OffsetCommit
    11: None,  # JoinGroup
    12: None,  # Heartbeat
    13: (("members",), "members"),  # LeaveGroup (v3+ lists members)
    14: None,  # SyncGroup
    19: (("topics",), "topics"),  # CreateTopics
    20: (("topics", "topic_names"), "responses"),  # DeleteTopics
    21: (("topics",), "topics"),  # DeleteRecords
    22: None,  # InitProducerId
    24: (("v3_and_below_topics",), "results_by_topic_v3_and_below"),  # AddPartitionsToTxn (v4+: top-level code)
    25: None,  # AddOffsetsToTxn
    26: None,  # EndTxn
    28: (("topics",), "topics"),  # TxnOffsetCommit
    33: (("resources",), "responses"),  # AlterConfigs
    37: (("topics",), "results"),  # CreatePartitions
    42: (("groups_names",), "results"),  # DeleteGroups
    44: (("resources",), "responses"),  # IncrementalAlterConfigs
    47: (("topics",), "topics"),  # OffsetDelete
    49: (("entries",), "entries"),  # AlterClientQuotas
    68: None,  # ConsumerGroupHeartbeat
    17: None,  # SaslHandshake
    36: None,  # SaslAuthenticate (an injected error fails the login)
    51: (("deletions", "upsertions"), "results"),  # AlterUserScramCredentials
    30: (("creations",), "results"),  # CreateAcls
    31: (("filters",), "filter_results"),  # DeleteAcls
    38: None,  # CreateDelegationToken
    39: None,  # RenewDelegationToken
    40: None,  # ExpireDelegationToken
    34: (("dirs",), "results"),  # AlterReplicaLogDirs: asked per dir, answered per topic (see error_from_request)
    76: None,  # ShareGroupHeartbeat
    78: None,  # ShareFetch: a top-level code (a share-session error)
    79: None,  # ShareAcknowledge
    91: None,  # AlterShareGroupOffsets
    92: None,  # DeleteShareGroupOffsets
    88: None,  # StreamsGroupHeartbeat
    27: (("markers",), "markers"),  # WriteTxnMarkers: per producer, topic and partition
    57: (("feature_updates",), "results"),  # UpdateFeatures (v2 lists no results on success, but does on error)
    64: None,  # UnregisterBroker
}
# Read-only APIs whose answer can be mirrored from the request as well (a refusal when the store is
# out of reach: storage_refusal.py), as above. OffsetFetch v8+ asks per group, below v8 per topic.
_READS_FROM_REQUEST: dict[int, tuple[tuple[str, ...], str] | None] = {
    2: (("topics",), "topics"),  # ListOffsets
    3: (("topics",), "topics"),  # Metadata
    9: (("groups",), "groups"),  # OffsetFetch v8+ (below v8: see error_from_request)
    23: (("topics",), "topics"),  # OffsetForLeaderEpoch
    61: (("topics",), "topics"),  # DescribeProducers
}
# Read-only APIs: the real answer with its error codes replaced.
_REWRITTEN = frozenset({2, 3, 9, 10, 15, 16, 18, 23, 29, 32, 35, 41, 43, 45, 46, 48, 50, 55, 60, 61, 65, 66, 69, 74,
                        75, 77, 89, 90})
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


def api_key_of(api: str | int) -> int:
    """An API key from its number or name ("Produce", "list_offsets", "ListOffsets")."""
    if isinstance(api, int):
        return api
    wanted = "".join(c for c in api.lower() if c.isalnum())
    for key, name in api_key_map.items():
        if name.replace("_", "") == wanted:
            return key
    raise ValueError(f"unknown Kafka API {api!r}")


def error_code_of(error: ErrorCode | int | str) -> ErrorCode:
    """An ErrorCode from the enum, its number or its name ("NOT_LEADER_OR_FOLLOWER")."""
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    try:
        return ErrorCode[error.lower()]
    except KeyError:
        raise ValueError(f"unknown Kafka error code {error!r}") from None


class Faults:
    """The faults set on one broker. Safe to change from any thread."""

    def __init__(self) -> None:
        self.rules: dict[int, list[Rule]] = {}
        self._fired: collections.Counter[int] = collections.Counter()
        self._lock = threading.Lock()

    def fail(self, api: str | int, error: ErrorCode | int | str, count: int | None = 1) -> None:
        """The next `count` requests of `api` (None: all, until cleared) answer `error`."""
        key = api_key_of(api)
        if key not in _FROM_REQUEST and key not in _REWRITTEN:
            raise ValueError(f"no injected error answers for {api_name(key)}")
        self._add([key], Rule(Kind.ERROR, count, error=error_code_of(error)))

    def delay(self, api: str | int | None, seconds: float, count: int | None = None) -> None:
        """Answer the next `count` requests of `api` (None: every API) `seconds` late."""
        self._add(self._keys(api), Rule(Kind.DELAY, count, seconds=seconds))

    def disconnect(
        self, api: str | int | None, count: int | None = 1, *, after_handling: bool = False
    ) -> None:
        """Close the connection on the next `count` requests of `api` (None: any API).

        By default the request is dropped unhandled (a broker gone before it
        acted). With after_handling=True it takes effect and only the answer
        is lost, the case that makes non-idempotent producers write twice.
        """
        self._add(self._keys(api), Rule(Kind.DISCONNECT, count, after_handling=after_handling))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self._fired.clear()

    def fired(self, api: str | int) -> int:
        """How many requests of `api` a fault has been applied to since the last clear()."""
        return self._fired[api_key_of(api)]

    def take(self, api_key: int) -> Rule | None:
        """The rule to apply to this request, counting it down (called by the broker)."""
        with self._lock:
            rules = self.rules.get(api_key)
            if not rules:
                return None
            rule = rules[0]
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    for other in list(self.rules):  # a rule for every API is shared
                        pending = self.rules[other]
                        if rule in pending:
                            pending.remove(rule)
                        if not pending:
                            del self.rules[other]
            self._fired[api_key] += 1
            return rule

    def _keys(self, api: str | int | None) -> list[int]:
        return list(HANDLERS) if api is None else [api_key_of(api)]

    def _add(self, keys: list[int], rule: Rule) -> None:
        if rule.remaining is not None and rule.remaining <= 0:
            raise ValueError("count must be positive, or None for no limit")
        with self._lock:
            for key in keys:
                self.rules.setdefault(key, []).append(rule)


async def apply(rule: Rule, ctx: Any, handler: Any, request: Any) -> Any:
    """Handle one request under a fault; returns what a handler returns."""
    key = ctx.header.api_key
    label = f"injected fault on {api_name(key)}"
    if rule.kind is Kind.DISCONNECT and not rule.after_handling:
        raise CloseConnection(f"{label}: connection dropped before handling")
    legacy_produce = key == 0 and ctx.version < FIRST_SERVED_PRODUCE  # refused by the handler anyway
    if rule.kind is Kind.ERROR and key in _FROM_REQUEST and not legacy_produce:
        log.info("%s: answering %s without handling", label, rule.error.name)
        if getattr(request, "acks", None) == 0:
            raise CloseConnection(f"{label}: acks=0 produce failed")  # as Kafka tells acks=0
        return error_from_request(key, ctx.version, request, rule.error)
    answer = await handler.handle(ctx, request)
    if rule.kind is Kind.DISCONNECT:
        if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
            await answer
        raise CloseConnection(f"{label}: connection dropped after handling")
    if answer is NO_RESPONSE:
        return answer
    return _later(rule, answer)


async def _later(rule: Rule, answer: Any) -> Any:
    body = await answer if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future) else answer
    if rule.kind is Kind.DELAY:
        await asyncio.sleep(rule.seconds)
        return body
    if isinstance(body, (bytes, bytearray)):  # a pre-encoded legacy answer: leave it
        return body
    if isinstance(body, list):  # Metadata of 1,000+ topics, encoded in slices: no entity to rewrite
        log.warning("injected fault: %s not injected into a pre-encoded answer of %d buffers", rule.error.name,
                    len(body))
        return body
    return with_error(body, rule.error)


def _message(error: ErrorCode) -> str:
    return f"injected by kafkacompat: {error.name.upper()}"


def with_error(entity: Any, error: ErrorCode) -> Any:
    """A copy of a response with every error code (and message) set to `error`."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code" or f.metadata.get("kafka_type") == "error_code":
            changes[f.name] = error
        elif f.name == "error_message":
            changes[f.name] = _message(error)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(with_error(item, error) for item in value)
        elif dataclasses.is_dataclass(value):
            changes[f.name] = with_error(value, error)
    return dataclasses.replace(entity, **changes)


def error_from_request(api_key: int, version: int, request: Any, error: ErrorCode) -> Any:
    """The error answer for a state-changing request (or a read in _READS_FROM_REQUEST), mirroring what it named."""
    cls = response_schema(api_key, version)
    arrays = _FROM_REQUEST[api_key] if api_key in _FROM_REQUEST else _READS_FROM_REQUEST[api_key]
    if api_key == 9 and version < 8:
        arrays = (("topics",), "topics")
    known: dict[str, Any] = {}
    if arrays is not None:
        sources, target = arrays
        items = next((getattr(request, s) for s in sources if hasattr(request, s)), None)
        if api_key == 51:  # one result per user named by a deletion or an upsertion, sorted (Kafka's getErrorResponse)
            items = tuple(sorted({item.name for item in (*request.deletions, *request.upsertions)}))
        if api_key == 34 and items is not None:  # each dir's topics, as Kafka's getErrorResponse lists them
            items = tuple(topic for log_dir in items for topic in log_dir.topics)
        item_cls = _hints(cls).get(target)
        if items is not None and item_cls is not None:
            known[target] = tuple(_mirror(_element(item_cls), item, error) for item in items)
    if api_key == 1:  # Fetch: a top-level code means a fetch-session error
        known.update(error_code=ErrorCode.none, session_id=0)
    return _filled(cls, error, known)


FROM_REQUEST = _FROM_REQUEST  # the authorizer builds its refusals of these the same way
MIRRORED = frozenset(_FROM_REQUEST) | frozenset(_READS_FROM_REQUEST)  # the APIs error_from_request answers


def filled_response(api_key: int, version: int, error: ErrorCode) -> Any:
    """A response carrying `error` everywhere and neutral values elsewhere (a refusal naming nothing)."""
    return _filled(response_schema(api_key, version), error, {})


def _mirror(cls: type, item: Any, error: ErrorCode) -> Any:
    """A response item naming what the request item named, carrying `error`."""
    if not dataclasses.is_dataclass(item):  # an array of names or group ids
        field = next(n for n in _ITEM_NAMES if n in _hints(cls))
        return _filled(cls, error, {field: item})
    known: dict[str, Any] = {}
    hints = _hints(cls)
    for name, tp in hints.items():
        source = next((s for s in _NESTED.get(name, ()) if hasattr(item, s)), None)
        if source is not None and _element(tp) is not None:
            known[name] = tuple(_mirror(_element(tp), sub, error) for sub in getattr(item, source))
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
            values[f.name] = _message(error)
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
    if dataclasses.is_dataclass(base):
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
            return args[0]
    return None
